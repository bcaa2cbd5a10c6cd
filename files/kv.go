package files

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
)

// KV is the storage files and batch records live in (see kvstore.KV).
type KV = kvstore.KV

// NewRedisKV returns a KV over client whose keys never expire: files are
// deleted by their owners.
func NewRedisKV(client redis.UniversalClient) *kvstore.Redis { return kvstore.NewRedis(client, 0) }

// ListKeys lists keys under prefix, treating a missing prefix as empty
// (see kvstore.ListKeys).
func ListKeys(ctx context.Context, kv KV, prefix string, recursive bool) ([]string, error) {
	return kvstore.ListKeys(ctx, kv, prefix, recursive)
}
