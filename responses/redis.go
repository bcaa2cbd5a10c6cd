package responses

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
)

// NewRedisKV returns a KV over client whose keys expire after ttl
// (DefaultRetention when zero; pass the Store's Retention), so Redis
// itself drops old responses.
func NewRedisKV(client redis.UniversalClient, ttl time.Duration) *kvstore.Redis {
	if ttl <= 0 {
		ttl = DefaultRetention
	}
	return kvstore.NewRedis(client, ttl)
}
