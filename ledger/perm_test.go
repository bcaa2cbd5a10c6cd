package ledger

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSQLiteFilesArePrivate: the embedded ledger's file and its -wal and
// -shm companions are created 0600 whatever the umask, and a directory
// the ledger creates for them 0700: records name keys, workspaces and
// metadata, which other users of the host must not read.
func TestSQLiteFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "made", "by", "ledger")
	path := filepath.Join(dir, "ledger.db")
	db := openTest(t, path)
	r := rec("w", 0, "gpt-4o", 200, 1)
	if err := db.Insert(context.Background(), []Record{r}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s is %v, want -rw-------", filepath.Base(name), m)
		}
	}
	for d := dir; d != filepath.Dir(filepath.Dir(filepath.Dir(dir))); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o700 {
			t.Errorf("directory %s is %v, want drwx------", filepath.Base(d), m)
		}
	}
}
