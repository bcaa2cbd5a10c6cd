package sqlkv

import (
	"path/filepath"
	"testing"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sqlkv/sqlkvtest"
)

// databases returns one DSN per database the tests run on: a SQLite file
// and a PostgreSQL schema.
func databases(t *testing.T) map[string]string {
	return map[string]string{
		"sqlite":   filepath.Join(t.TempDir(), "records.db"),
		"postgres": "", // filled by open, which may skip
	}
}

// open opens dsn ("" for a fresh PostgreSQL schema), closed at the end.
func open(t testing.TB, name, dsn string) *KV {
	t.Helper()
	if name == "postgres" && dsn == "" {
		dsn = sqlkvtest.PostgresDSN(t)
	}
	kv, err := Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return kv
}

// pair opens two handles (two instances) on one fresh database.
func pair(t *testing.T, name, dsn string) (*KV, *KV) {
	t.Helper()
	if name == "postgres" {
		dsn = sqlkvtest.PostgresDSN(t)
	}
	return open(t, name, dsn), open(t, name, dsn)
}
