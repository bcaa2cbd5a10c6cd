package llmgateway

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/caddyfile/*.json from the adapter's output")

// TestCaddyfileGolden adapts every Caddyfile in testdata/caddyfile (a copy
// of examples/Caddyfile, the shapes the integration tests build, and one
// using every option of llm and llm_gateway) and compares the JSON with the
// recorded one byte for byte, so moving the parsers cannot change what a
// Caddyfile means. Run with -update to record a deliberate change.
func TestCaddyfileGolden(t *testing.T) {
	// The example reads its ports from the environment, with defaults.
	t.Setenv("GATEWAY_ADMIN_PORT", "2019")
	t.Setenv("GATEWAY_PORT", "8787")
	files, err := filepath.Glob(filepath.Join("testdata", "caddyfile", "*.caddyfile"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden Caddyfiles: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".caddyfile")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, map[string]any{"filename": file})
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(file, ".caddyfile") + ".json"
			if *updateGolden {
				var pretty bytes.Buffer
				if err := json.Indent(&pretty, out, "", "\t"); err != nil {
					t.Fatal(err)
				}
				pretty.WriteByte('\n')
				if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to record it)", err)
			}
			// The recorded file is indented for review; compacting it
			// gives back the adapter's exact bytes.
			var compact bytes.Buffer
			if err := json.Compact(&compact, want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, compact.Bytes()) {
				t.Fatalf("adapted JSON changed:\n got %s\nwant %s", out, compact.Bytes())
			}
		})
	}
}
