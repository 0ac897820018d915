package worker_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/onceflow/onceflow/worker"
)

// pki is a throw-away CA with a server and a client certificate.
type pki struct {
	caPEM                 []byte
	server                tls.Certificate
	clientCert, clientKey []byte
	pool                  *x509.CertPool
}

func newPKI(t *testing.T) pki {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "onceflow test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage) ([]byte, []byte) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "onceflow test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"temporal.test"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kDER, _ := x509.MarshalECPrivateKey(k)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kDER})
	}
	p := pki{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	sc, sk := issue(2, x509.ExtKeyUsageServerAuth)
	if p.server, err = tls.X509KeyPair(sc, sk); err != nil {
		t.Fatal(err)
	}
	p.clientCert, p.clientKey = issue(3, x509.ExtKeyUsageClientAuth)
	return p
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The TLS flags make a client configuration that passes a real mutual-TLS
// handshake with a server whose certificate the CA signed.
func TestTemporalTLSConfiguration(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	cfg := worker.Config{TemporalAddress: ln.Addr().String(),
		TemporalTLSCertFile: writeFile(t, "client.pem", p.clientCert), TemporalTLSKeyFile: writeFile(t, "client-key.pem", p.clientKey),
		TemporalTLSCAFile: writeFile(t, "ca.pem", p.caPEM)}
	opts, err := cfg.TemporalClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	tc := opts.ConnectionOptions.TLS
	if tc == nil || len(tc.Certificates) != 1 || tc.RootCAs == nil || tc.ServerName != "127.0.0.1" || opts.HostPort != ln.Addr().String() {
		t.Fatalf("client options = %+v, TLS %+v", opts, tc)
	}
	conn, err := tls.Dial("tcp", ln.Addr().String(), tc)
	if err != nil {
		t.Fatalf("handshake with the configured TLS: %v", err)
	}
	_ = conn.Close()

	// Without the CA the server's certificate is refused.
	cfg.TemporalTLSCAFile = ""
	opts, err = cfg.TemporalClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := tls.Dial("tcp", ln.Addr().String(), opts.ConnectionOptions.TLS); err == nil {
		_ = conn.Close()
		t.Fatal("a server certificate of an unknown CA was accepted")
	}
}

func TestTemporalAPIKeyAndPassthrough(t *testing.T) {
	t.Parallel()
	cfg := worker.Config{TemporalAPIKey: "key-123", TemporalAddress: "ns.tmprl.cloud:7233", Namespace: "ns.acct"}
	cfg.ClientOptions.Identity = "worker-7"
	opts, err := cfg.TemporalClientOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Credentials == nil || opts.ConnectionOptions.TLS == nil || opts.ConnectionOptions.TLS.ServerName != "ns.tmprl.cloud" ||
		opts.Namespace != "ns.acct" || opts.Identity != "worker-7" || opts.HostPort != "ns.tmprl.cloud:7233" {
		t.Fatalf("options = %+v", opts)
	}
}
