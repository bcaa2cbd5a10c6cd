package ledger

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestDictionaryForgetsRolledBack: names a transaction added to the
// dictionary are cached only once it commits. A batch that fails after
// adding a name leaves no id of it in the cache (the rolled-back row does
// not exist), and the next batch with that name adds it again and reads
// back as written, on both databases.
func TestDictionaryForgetsRolledBack(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			db := openTest(t, st.dsn(t))
			ctx := context.Background()
			r := rec("ws", 0, "model-new", 200, 1)
			boom := errors.New("boom")
			err := db.write(ctx, func(w txWriter) error {
				if err := db.resolve(ctx, w, []Record{r}, w.dims()); err != nil {
					return err
				}
				if w.dims().id("model-new") == 0 {
					t.Error("the name has no id within its transaction")
				}
				return boom
			})
			if !errors.Is(err, boom) {
				t.Fatal(err)
			}
			db.dims.mu.Lock()
			_, cached := db.dims.ids["model-new"]
			db.dims.mu.Unlock()
			if cached {
				t.Fatal("a name of a rolled-back transaction is cached")
			}
			if err := db.Insert(ctx, []Record{r}); err != nil {
				t.Fatal(err)
			}
			got, n, _, err := db.Logs(ctx, &Filter{Workspace: "ws", Models: []string{"model-new"}}, 10, 0)
			if err != nil || n != 1 || got[0].Model != "model-new" || got[0].Workspace != "ws" || got[0].APIKey != "key-ws" {
				t.Fatalf("after the rollback: %d records %+v (%v)", n, got, err)
			}
		})
	}
}

// TestDictionaryInstancesAgree: two DBs on one database (two instances of
// a cluster, or a reload's new config) adding the same names each cache
// the ids the other wrote, so every record reads back with its own names.
func TestDictionaryInstancesAgree(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			dsn := st.dsn(t)
			a, b := openTest(t, dsn), openTest(t, dsn)
			ctx := context.Background()
			for i := 0; i < 3; i++ {
				for j, db := range []*DB{a, b} {
					r := rec(fmt.Sprintf("ws-%d", (i+j)%2), 0, fmt.Sprintf("model-%d", i), 200, 1)
					r.TraceID = fmt.Sprintf("t-%d-%d", i, j)
					if err := db.Insert(ctx, []Record{r}); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, n, _, err := a.Logs(ctx, &Filter{Organisation: "org"}, 10, 0)
			if err != nil || n != 6 {
				t.Fatalf("%d records (%v)", n, err)
			}
			for _, r := range got {
				var i, j int
				fmt.Sscanf(r.TraceID, "t-%d-%d", &i, &j)
				if r.Model != fmt.Sprintf("model-%d", i) || r.Workspace != fmt.Sprintf("ws-%d", (i+j)%2) || r.APIKey != "key-"+r.Workspace {
					t.Errorf("record %s reads back as %s, %s, %s", r.TraceID, r.Model, r.Workspace, r.APIKey)
				}
			}
		})
	}
}

// TestDimCacheBounded: the cache starts again empty past dimCacheMax
// names instead of growing with every model a client makes up.
func TestDimCacheBounded(t *testing.T) {
	var c dimCache
	fresh := map[string]int64{}
	for i := 0; i < dimCacheMax; i++ {
		fresh[fmt.Sprint(i)] = int64(i + 1)
	}
	c.learn(fresh)
	c.learn(map[string]int64{"one more": 1 << 20})
	if len(c.ids) != 1 || c.ids["one more"] != 1<<20 {
		t.Errorf("the cache holds %d names past its bound", len(c.ids))
	}
}
