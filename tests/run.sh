#!/usr/bin/env bash
# Installs everything the test suite needs, then runs all of it: the static checks first
# (tests/check.sh: ruff, mypy, import contracts; seconds), then pytest over tests/ and compat/.
#   bash tests/run.sh            # the whole suite
#   bash tests/run.sh --fast     # the fast tier: static checks and tests/unit (under a minute)
#   bash tests/run.sh -k fetch   # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."
fast=0
if [ "${1:-}" = "--fast" ]; then
  fast=1
  shift
fi

# System packages: kcat (librdkafka's CLI, a client under test), strace (the zero-copy test
# watches the broker's syscalls), a JDK and Maven (the compat suite runs real Apache Kafka, its CLI
# tools and a Java client harness from Maven Central jars), Debian's zookeeper (tests/cluster), Debian's
# prometheus (a real Prometheus server scrapes a cluster in tests/cluster/test_prometheus.py).
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v strace >/dev/null 2>&1 || missing+=(strace)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)  # tests/cluster: a real ZooKeeper
command -v go >/dev/null 2>&1 || missing+=(golang-go)  # compat/go: franz-go client (needs Go >= 1.21 to fetch its toolchain)
command -v npm >/dev/null 2>&1 || missing+=(npm)  # compat/node: kafkajs client
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)  # tests/cluster/test_prometheus.py scrapes a cluster
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "installing system packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Python packages, in a virtualenv next to the code.
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -c tests/constraints.txt -e '.[test]'

if ((fast)); then  # no JVM, Go or npm modules: the fast tier runs none of compat/
  bash tests/check.sh
  exec .venv/bin/python -m pytest tests/unit "$@"
fi

# JVM classpaths for compat/ (pinned in compat/pom.xml; a warm machine reuses ~/.m2).
bash compat/jvm/fetch.sh

# Go modules and npm packages for compat/ (pinned in compat/go/go.sum, compat/node/package-lock.json).
(cd compat/go && go mod download)
[ -d compat/node/node_modules ] || (cd compat/node && npm ci --no-audit --no-fund)

bash tests/check.sh
exec .venv/bin/python -m pytest "$@"
