package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// TestClusterRedisTLSAndKeyPrefix runs the gateway against a Redis that
// speaks only TLS and demands a client certificate (a redis-server the test
// starts, with certificates made here), with a key_prefix: a policy
// created through the API is enforced, and every key the gateway wrote in
// that Redis starts with the prefix.
func TestClusterRedisTLSAndKeyPrefix(t *testing.T) {
	dir := t.TempDir()
	pki := newTestPKI(t, dir)
	addr, client := startTLSRedis(t, dir, pki)

	const prefix = "fleet-a:"
	block := fmt.Sprintf("redis %s {\n\t\t\ttls {\n\t\t\t\tca %s\n\t\t\t\tcert %s\n\t\t\t\tkey %s\n\t\t\t\tserver_name localhost\n\t\t\t}\n"+
		"\t\t\tkey_prefix %s\n\t\t}", addr, pki.ca, pki.clientCert, pki.clientKey, prefix)
	up := newFakeOpenAI(t)
	loadRL(t, rlSite{Redis: block})

	run := uuid.NewString()
	createPolicy(t, gatewayKey, `{"type":"requests","unit":"rpm","value":2,"conditions":[{"key":"metadata.run","value":"*"}],"group_by":[{"key":"metadata.run"}]}`)
	createPolicy(t, gatewayKey, `{"type":"tokens","unit":"rpm","value":100000,"conditions":[{"key":"metadata.run","value":"*"}],"group_by":[{"key":"metadata.run"}]}`)
	for i, want := range []int{200, 200, 429} {
		if resp, raw := rlChat(t, gatewayURL(), gatewayKey, up.URL, "", "x-gateway-metadata", `{"run":"`+run+`"}`); resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d: %s", i+1, resp.StatusCode, want, raw)
		}
	}
	ctx := context.Background()
	keys, err := client.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 2 {
		t.Fatalf("the gateway wrote %d keys (%v), want the policy hash and counters", len(keys), keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			t.Fatalf("key %q written without the prefix %q (all keys: %v)", k, prefix, keys)
		}
	}
	t.Logf("over TLS with a client certificate: %d keys, all under %q", len(keys), prefix)
}

// testPKI holds the PEM files of a CA, a server certificate for localhost
// and 127.0.0.1, and a client certificate.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	pool                                             *x509.CertPool
	client                                           tls.Certificate
}

func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage, name string) (string, string, tls.Certificate) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(k)
		c := write(name+".crt", "CERTIFICATE", der)
		kp := write(name+".key", "EC PRIVATE KEY", kder)
		pair, err := tls.LoadX509KeyPair(c, kp)
		if err != nil {
			t.Fatal(err)
		}
		return c, kp, pair
	}
	p := testPKI{ca: write("ca.crt", "CERTIFICATE", caDER), pool: x509.NewCertPool()}
	p.pool.AddCert(caCert)
	p.serverCert, p.serverKey, _ = leaf(2, x509.ExtKeyUsageServerAuth, "server")
	p.clientCert, p.clientKey, p.client = leaf(3, x509.ExtKeyUsageClientAuth, "client")
	return p
}

// startTLSRedis starts redis-server listening on TLS only (no plain port),
// requiring client certificates, with nothing persisted, until the test
// ends. It skips the test, saying why, when redis-server is missing or
// was built without TLS.
func startTLSRedis(t *testing.T, dir string, pki testPKI) (string, *redis.Client) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("skipping: redis-server is not installed (needed to start a TLS Redis)")
	}
	port := freePort()
	cmd := exec.Command(bin, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", pki.serverCert, "--tls-key-file", pki.serverKey, "--tls-ca-cert-file", pki.ca,
		"--tls-auth-clients", "yes", "--save", "", "--appendonly", "no", "--dir", dir)
	out := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
		TLSConfig: &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pki.client}, ServerName: "localhost"}})
	t.Cleanup(func() { _ = c.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			if s := out.String(); strings.Contains(s, "tls") || strings.Contains(s, "TLS") {
				t.Skipf("skipping: this redis-server cannot serve TLS:\n%s", s)
			}
			t.Fatalf("redis-server exited:\n%s", out.String())
		default:
		}
		if c.Ping(context.Background()).Err() == nil {
			return addr, c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the TLS redis-server did not answer in 10s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
