// TLS and SASL for the client programs, from the environment (compat/test_security.py sets it;
// unset, the clients are plaintext as before):
//
//	COMPAT_TLS_CA                   a PEM CA file: connect with TLS, checking the broker against it
//	COMPAT_TLS_CERT, COMPAT_TLS_KEY a client certificate chain and its key (PEM)
//	COMPAT_SASL                     MECHANISM:user:password (PLAIN or SCRAM-SHA-512)
package main

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func securityOpts() []kgo.Opt {
	var opts []kgo.Opt
	if ca := os.Getenv("COMPAT_TLS_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		must(err, "COMPAT_TLS_CA")
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fail("no certificate in %s", ca)
		}
		cfg := &tls.Config{RootCAs: pool}
		if cert := os.Getenv("COMPAT_TLS_CERT"); cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, os.Getenv("COMPAT_TLS_KEY"))
			must(err, "COMPAT_TLS_CERT")
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s := os.Getenv("COMPAT_SASL"); s != "" {
		parts := strings.SplitN(s, ":", 3)
		if len(parts) != 3 {
			fail("COMPAT_SASL %q is not MECHANISM:user:password", s)
		}
		switch parts[0] {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: parts[1], Pass: parts[2]}.AsMechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: parts[1], Pass: parts[2]}.AsSha512Mechanism()))
		default:
			fail("COMPAT_SASL mechanism %s", parts[0])
		}
	}
	return opts
}
