#!/usr/bin/env bash
# Resolves the compat suite's JVM classpaths from Maven Central (versions pinned in compat/pom.xml)
# into compat/target/<profile>/. A warm machine reuses ~/.m2 and the copied jars; a profile whose
# directory already holds its jars and whose pom has not changed since is skipped.
#   bash compat/jvm/fetch.sh                 # every classpath
#   bash compat/jvm/fetch.sh kafka clients-4 # some of them
set -euo pipefail
cd "$(dirname "$0")/.."
profiles=("$@")
((${#profiles[@]})) || profiles=(kafka kafka-3.9 clients-3.9 clients-4 streams spark jmx-exporter)
for p in "${profiles[@]}"; do
  out="target/$p"
  stamp="$out/.fetched"
  if [ -f "$stamp" ] && [ "$stamp" -nt pom.xml ]; then
    continue
  fi
  echo "compat: resolving JVM classpath '$p' into compat/$out"
  rm -rf "$out"
  mkdir -p "$out"
  mvn -q -B -s jvm/settings.xml -f pom.xml -P "$p" dependency:copy-dependencies -DoutputDirectory="$out"
  touch "$stamp"
done
