package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tenancy tests run the rate-limit site (rlSite: gatewayKey and rlSecondKey
// in workspace rlWS, rlOtherKey in rlOtherWS, one organisation rlOrg),
// optionally with a site access log, and check that nothing one
// workspace's key does reaches the other workspace.

// tenant is one side of a two-workspace test.
type tenant struct {
	name, key, ws string
}

var (
	tenantA = tenant{"A", gatewayKey, rlWS}
	tenantB = tenant{"B", rlOtherKey, rlOtherWS}
)

// tenantPairs are both directions: the owner of a record, and the other
// workspace's key that must not reach it.
var tenantPairs = []struct{ owner, other tenant }{
	{tenantA, tenantB},
	{tenantB, tenantA},
}

// loadTenancy runs s with a site access log written to accessLog (none
// when empty) and returns the access log's path.
func loadTenancy(t *testing.T, s rlSite, accessLog bool) string {
	t.Helper()
	if s.Storage == "" {
		s.Storage = storageDir(t)
	}
	newHTTPPort()
	cf := s.caddyfile()
	path := ""
	if accessLog {
		path = filepath.Join(s.Storage, "access.log")
		cf = strings.Replace(cf, "\thandle /v1/* {", "\tlog {\n\t\toutput file "+path+"\n\t\tformat json\n\t}\n\thandle /v1/* {", 1)
	}
	loadCaddyfile(t, cf)
	rlClient.CloseIdleConnections()
	return path
}

// linesWith returns the lines of a log file that contain every needle.
func linesWith(t *testing.T, path string, needles ...string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
next:
	for _, l := range strings.Split(string(b), "\n") {
		for _, n := range needles {
			if !strings.Contains(l, n) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}
