package kvstore

import (
	"context"
	"testing"

	"github.com/google/uuid"
)

// TestCompareAndDelete: a delete from a stale value, or of nothing,
// deletes nothing; one from the stored value deletes it for both
// instances (and drops it from the folder's listing).
func TestCompareAndDelete(t *testing.T) {
	ctx := context.Background()
	for name, kvs := range casBackends(t) {
		t.Run(name, func(t *testing.T) {
			dir := "llm_gateway/cad/" + uuid.NewString()
			key := dir + "/r.json"
			if ok, err := CompareAndDelete(ctx, kvs[0], key, []byte("v1")); ok || err != nil {
				t.Fatalf("deleting nothing: %v, %v", ok, err)
			}
			if err := kvs[0].Store(ctx, key, []byte("v2")); err != nil {
				t.Fatal(err)
			}
			if ok, err := CompareAndDelete(ctx, kvs[1], key, []byte("v1")); ok || err != nil {
				t.Fatalf("stale delete: %v, %v", ok, err)
			}
			if got, err := kvs[0].Load(ctx, key); err != nil || string(got) != "v2" {
				t.Fatalf("after a stale delete: %q, %v", got, err)
			}
			if ok, err := CompareAndDelete(ctx, kvs[1], key, []byte("v2")); !ok || err != nil {
				t.Fatalf("delete: %v, %v", ok, err)
			}
			if _, err := kvs[0].Load(ctx, key); err == nil {
				t.Fatal("still stored")
			}
			if names, _ := ListKeys(ctx, kvs[0], dir, false); len(names) != 0 {
				t.Fatalf("still listed: %v", names)
			}
		})
	}
}
