// Managed batches run under the route that created them (issue 21: a
// batch created on a public-only route reached loopback through the last
// provisioned route's runner), and a custom host's credentials never
// reach storage.

package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// twoRoutes is one site with a default (public-only) route and one that
// allows loopback custom hosts; trustedFirst swaps which of them gets the
// /v1/* handle, so in one of the two Caddyfiles the trusted route is the
// one provisioned last, whatever order Caddy provisions them in.
func twoRoutes(trustedFirst bool) (cf, publicBase, trustedBase string) {
	public, trusted := "", "custom_host_allow loopback"
	a, b := public, trusted
	if trustedFirst {
		a, b = trusted, public
	}
	cf = fmt.Sprintf(`{
	admin localhost:%d
	auto_https off
	persist_config off
	llm {
		api_key test {env.TEST_GATEWAY_KEY}
	}
}

:%d {
	handle /v1/* {
		llm_gateway {
			%s
		}
	}
	handle_path /t/* {
		llm_gateway {
			%s
		}
	}
}
`, adminPort, httpPort, a, b)
	root := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	publicBase, trustedBase = root+"/v1", root+"/t/v1"
	if trustedFirst {
		publicBase, trustedBase = trustedBase, publicBase
	}
	return cf, publicBase, trustedBase
}

func TestBatchesHardeningRunsUnderCreatingRoute(t *testing.T) {
	for _, trustedFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("trusted_first=%v", trustedFirst), func(t *testing.T) {
			up := newCountingProvider(t)
			newHTTPPort()
			cf, publicBase, trustedBase := twoRoutes(trustedFirst)
			loadCaddyfile(t, cf)
			headers := []string{"x-gateway-provider", "openai", "x-gateway-custom-host", up.URL + "/v1", "Authorization", "Bearer sk-x"}

			// Created on the public-only route: no line may connect.
			file := uploadBatchFile(t, publicBase, openaiBatchLines(3, 0))
			b := waitBatchDone(t, publicBase, mustCreateBatch(t, publicBase, file, headers...))
			out, errs := checkCountsMatchFiles(t, publicBase, b)
			if n := up.conns.Load(); n != 0 {
				t.Fatalf("the public route's batch made %d connections to loopback", n)
			}
			if len(out) != 0 || len(errs) != 3 {
				t.Fatalf("public route batch: %d output lines, %d error lines (%s)", len(out), len(errs), b.Raw)
			}
			for _, l := range errs {
				if l.Get("response.status_code").Int() != 400 || l.Get("response.body.error.code").Str != "custom_host_not_allowed" {
					t.Fatalf("error line %s", l.Raw)
				}
			}

			// The same batch on the route that allows loopback runs there.
			file = uploadBatchFile(t, trustedBase, openaiBatchLines(3, 0))
			b = waitBatchDone(t, trustedBase, mustCreateBatch(t, trustedBase, file, headers...))
			out, _ = checkCountsMatchFiles(t, trustedBase, b)
			if len(out) != 3 || up.conns.Load() == 0 || !strings.Contains(out[0].Raw, "internal answer") {
				t.Fatalf("trusted route batch: %s, %d connections", b.Raw, up.conns.Load())
			}
		})
	}
}

// TestBatchesHardeningCustomHostCredentialsNotStored creates a batch
// whose custom host carries userinfo and a query token: it runs (the
// address is held in memory) but no stored byte holds the secrets.
func TestBatchesHardeningCustomHostCredentialsNotStored(t *testing.T) {
	start := time.Now().Add(-time.Second)
	up := newCountingProvider(t)
	loadFresh(t, site{})
	base := gatewayURL()
	host := strings.Replace(up.URL, "http://", "http://batchuser:s3cretUserinfo@", 1) + "/v1?token=s3cretQuery"
	file := uploadBatchFile(t, base, openaiBatchLines(2, 0))
	b := waitBatchDone(t, base, mustCreateBatch(t, base, file,
		"x-gateway-provider", "openai", "x-gateway-custom-host", host, "Authorization", "Bearer sk-x"))
	if out, _ := checkCountsMatchFiles(t, base, b); len(out) != 2 {
		t.Fatalf("batch %s", b.Raw)
	}
	// Caddy's default storage, where the gateway keeps its records
	// (its path is fixed when Caddy's package loads).
	dir := filepath.Join(caddy.DefaultStorage.Path, "llm_gateway")
	found := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		// The batch engine removes its working files (the charges file)
		// as the batch ends, so a file listed may be gone when read:
		// what no longer exists holds nothing.
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		// The storage folder is shared by test runs: read what this
		// test wrote.
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || info.ModTime().Before(start) {
			return err
		}
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if strings.Contains(p, b.Get("id").Str) {
			found++
		}
		for _, secret := range []string{"s3cretUserinfo", "s3cretQuery", "batchuser"} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s holds %q", p, secret)
			}
		}
		return nil
	})
	if err != nil || found == 0 {
		t.Fatalf("walking %s: %v, %d files of the batch", dir, err, found)
	}
}
