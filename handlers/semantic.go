package handlers

import (
	"strconv"
	"sync"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/app"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache/semantic"
)

// responseCache is the cache step's view of the gateway's response cache:
// the llm app's answer store (in-process, or Redis when the app has one)
// and, when the app configures semantic_cache, its vector index and this
// route's embedder.
type responseCache struct {
	*semantic.Cache
	// embedder identifies the embeddings target in partitions: vectors of
	// different embedding models are not comparable.
	embedder string
	// warnOnce reports, once per route, targets asking for semantic mode
	// while no semantic cache is configured.
	warnOnce sync.Once
}

// provisionCache loads the llm app's response cache, its answer backend
// and the semantic index; it records what to release in Cleanup.
func (g *Gateway) provisionCache() error {
	store, release, err := g.app.ResponseCache(g.CacheSize)
	if err != nil {
		return err
	}
	g.release = append(g.release, release)
	settings, index, release, err := g.app.SemanticIndex()
	if err != nil {
		return err
	}
	g.release = append(g.release, release)
	c := &semantic.Cache{Store: g.app.CacheBackend(store), Logger: g.logger, Now: app.Now}
	rc := &responseCache{Cache: c}
	if index != nil {
		c.Index = index
		c.Embedder = &gatewayEmbedder{g: g, virtualKey: settings.VirtualKey, model: settings.Model}
		c.Threshold, c.EmbedTimeout = settings.Threshold, settings.EmbedTimeout
		rc.embedder = strconv.Quote(settings.VirtualKey) + " " + strconv.Quote(settings.Model)
	}
	g.cache = rc
	return nil
}

// semanticEnabled reports whether semantic mode is more than exact match.
func (rc *responseCache) semanticEnabled() bool { return rc.Index != nil }

// warnNoSemantic logs, once, that semantic mode is served as exact match.
func (rc *responseCache) warnNoSemantic(g *Gateway) {
	rc.warnOnce.Do(func() {
		g.logger.Warn("a target asks for cache mode \"semantic\" but the llm app configures no semantic_cache: served as exact match")
	})
}
