package routing

import (
	"encoding/json"
	"sync"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ingress"
)

// ConfigCache memoises validated, decoded configuration objects by their
// raw JSON. Clients tend to send the same few configs on every request, so
// schema validation (tens of microseconds) runs once per distinct config
// rather than per request. Decoded configs are read-only once cached.
type ConfigCache struct {
	mu  sync.RWMutex
	m   map[string]*Config
	max int
}

// NewConfigCache returns a cache holding at most max configs.
func NewConfigCache(max int) *ConfigCache {
	return &ConfigCache{m: make(map[string]*Config, 16), max: max}
}

// Parse validates and decodes raw, or returns the cached result. Invalid
// configs are not cached, so a flood of distinct bad configs costs only
// validation.
func (c *ConfigCache) Parse(raw string) (*Config, error) {
	if c != nil {
		c.mu.RLock()
		cfg := c.m[raw]
		c.mu.RUnlock()
		if cfg != nil {
			return cfg, nil
		}
	}
	if err := ValidateConfig([]byte(raw)); err != nil {
		return nil, err
	}
	cfg := new(Config)
	if err := json.Unmarshal([]byte(raw), cfg); err != nil {
		// The schema accepts 1.0 as an integer; encoding/json does not.
		return nil, apierror.BadRequest(ingress.Prefix+ingress.Config, "invalid config: %v", err)
	}
	if c != nil {
		c.mu.Lock()
		if len(c.m) >= c.max {
			for k := range c.m { // evict an arbitrary entry
				delete(c.m, k)
				break
			}
		}
		c.m[raw] = cfg
		c.mu.Unlock()
	}
	return cfg, nil
}
