package ledgerapi

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/ledger"
)

// analyticsRoutes adds the analytics graphs and groups.
func analyticsRoutes(add func(path, scope string, needsDB bool, h handler)) {
	graphs := map[string]func(*series) any{
		"requests":       requestsGraph,
		"cost":           costGraph,
		"tokens":         tokensGraph,
		"errors":         errorsGraph,
		"errors/rate":    errorRateGraph,
		"errors-rate":    errorRateGraph,
		"cache/hit-rate": cacheHitGraph,
		"cache-hit-rate": cacheHitGraph,
	}
	for name, g := range graphs {
		add("/v1/analytics/graphs/"+name, scopeAnalytics, true, graph(g))
	}
	add("/v1/analytics/graphs/latency", scopeAnalytics, true, latencyGraph)
	groups := map[string]groupBy{
		"ai-models":   {column: ledger.ByModel, name: "ai_model"},
		"model":       {column: ledger.ByModel, name: "ai_model"},
		"workspaces":  {column: ledger.ByWorkspace, name: "workspace_id"},
		"workspace":   {column: ledger.ByWorkspace, name: "workspace_id"},
		"api_key":     {column: ledger.ByAPIKey, name: "api_key"},
		"provider":    {column: ledger.ByProvider, name: "provider"},
		"ai_service":  {column: ledger.ByProvider, name: "ai_service"},
		"config":      {column: ledger.ByConfig, name: "config"},
		"status_code": {column: ledger.ByStatus, name: "status_code"},
		"users":       {metaKey: "_user", name: "user"},
		// The identity provider's users: the callers named
		// identity.UserPrefix+sub, which the ledger keys as API keys.
		"idp-users": {column: ledger.ByAPIKey, prefix: identity.UserPrefix, name: "user"},
	}
	for name, g := range groups {
		add("/v1/analytics/groups/"+name, scopeAnalytics, true, groupHandler(g))
	}
	add("/v1/analytics/groups/metadata/{key}", scopeAnalytics, true, metadataGroups)
}

// bucketFor picks a graph's bucket from its range, so a graph has at most
// a few hundred points: minutes up to two hours, hours up to two days,
// days up to 90 days, weeks beyond.
func bucketFor(from, to time.Time) time.Duration {
	switch d := to.Sub(from); {
	case d <= 2*time.Hour:
		return time.Minute
	case d <= 48*time.Hour:
		return time.Hour
	case d <= 90*24*time.Hour:
		return 24 * time.Hour
	default:
		return 7 * 24 * time.Hour
	}
}

// buckets are the graphs' bucket choices, by the name ?bucket= gives.
var buckets = map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour, "week": 7 * 24 * time.Hour}

// maxPoints bounds a graph's buckets when ?bucket= picks their size.
const maxPoints = 1000

// bucket is the graph's bucket: ?bucket= (minute, hour, day or week)
// when given, so a chart can ask for a finer one than bucketFor's (a
// week by hours), else bucketFor's. At most maxPoints buckets.
func (c *call) bucket(from, to time.Time) (time.Duration, error) {
	v := c.q.Get("bucket")
	if v == "" {
		return bucketFor(from, to), nil
	}
	b, ok := buckets[v]
	if !ok {
		return 0, apierror.BadRequest("bucket", "must be minute, hour, day or week")
	}
	if to.Sub(from)/b >= maxPoints {
		return 0, apierror.BadRequest("bucket", "gives more than %d points over this range: choose a longer bucket", maxPoints)
	}
	return b, nil
}

// series is a graph's buckets, every one from the range's start to its
// end (empty ones zero), and the totals over them.
type series struct {
	points []ledger.Point
	all    ledger.Totals
}

func (c *call) series() (*series, *ledger.Filter, time.Duration, error) {
	f, err := c.filter(true)
	if err != nil {
		return nil, nil, 0, err
	}
	bucket, err := c.bucket(f.From, f.To)
	if err != nil {
		return nil, nil, 0, err
	}
	pts, all, err := c.db.Series(c.r.Context(), f, bucket)
	if err != nil {
		return nil, nil, 0, err
	}
	byStart := make(map[int64]ledger.Point, len(pts))
	for _, p := range pts {
		byStart[p.Start.UnixMicro()] = p
	}
	var out []ledger.Point
	for t := f.From.UTC().Truncate(bucket); t.Before(f.To); t = t.Add(bucket) {
		p, ok := byStart[t.UnixMicro()]
		if !ok {
			p = ledger.Point{Start: t}
		}
		out = append(out, p)
	}
	return &series{points: out, all: all}, f, bucket, nil
}

// graphResponse is the reference's analytics-graph object.
type graphResponse struct {
	Summary    map[string]any   `json:"summary"`
	DataPoints []map[string]any `json:"data_points"`
	Object     string           `json:"object"`
}

// graph makes an API of a graph drawn from a series.
func graph(draw func(*series) any) handler {
	return func(c *call) (any, error) {
		s, _, _, err := c.series()
		if err != nil {
			return nil, err
		}
		return draw(s), nil
	}
}

// draw builds a graph whose summary and points are row applied to the
// totals and to each bucket.
func draw(s *series, row func(*ledger.Totals) map[string]any) *graphResponse {
	g := &graphResponse{Summary: row(&s.all), DataPoints: make([]map[string]any, 0, len(s.points)), Object: "analytics-graph"}
	for i := range s.points {
		p := row(&s.points[i].Totals)
		p["timestamp"] = s.points[i].Start.Format(time.RFC3339)
		g.DataPoints = append(g.DataPoints, p)
	}
	return g
}

func ratio(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

func requestsGraph(s *series) any {
	return draw(s, func(t *ledger.Totals) map[string]any { return map[string]any{"total": t.Requests} })
}

// costGraph is in cents, as the reference's; total_usd is the exact sum
// in dollars (the ledger counts nano-dollars), and cost_unknown counts
// requests on unpriced models.
func costGraph(s *series) any {
	return draw(s, func(t *ledger.Totals) map[string]any {
		return map[string]any{"total": cents(t.CostNanoUSD), "avg": ratio(t.CostNanoUSD, t.Requests) / (ledger.NanoUSD / 100),
			"total_usd": usd(t.CostNanoUSD), "cost_unknown": t.CostUnknown}
	})
}

func tokensGraph(s *series) any {
	return draw(s, func(t *ledger.Totals) map[string]any {
		total := t.InputTokens + t.OutputTokens
		return map[string]any{"total": total, "avg": ratio(total, t.Requests),
			"input_tokens": t.InputTokens, "output_tokens": t.OutputTokens}
	})
}

func errorsGraph(s *series) any {
	return draw(s, func(t *ledger.Totals) map[string]any { return map[string]any{"total": t.Errors} })
}

// errorRateGraph's rate is a percentage, as the reference's.
func errorRateGraph(s *series) any {
	return draw(s, func(t *ledger.Totals) map[string]any {
		return map[string]any{"rate": 100 * ratio(t.Errors, t.Requests)}
	})
}

func cacheHitGraph(s *series) any {
	g := draw(s, func(t *ledger.Totals) map[string]any {
		return map[string]any{"simple_hits": t.SimpleHits, "semantic_hits": t.SemanticHits,
			"rate": 100 * ratio(t.SimpleHits+t.SemanticHits, t.Requests),
			// The gateway prices a hit at zero and does not estimate
			// what it saved.
			"cumulative_simple_cache_savings": 0, "cumulative_semantic_cache_savings": 0}
	})
	g.Summary = map[string]any{"total": s.all.SimpleHits + s.all.SemanticHits, "rate": 100 * ratio(s.all.SimpleHits+s.all.SemanticHits, s.all.Requests)}
	return g
}

// latencyGraph gives the mean and percentiles in milliseconds. The
// percentiles come from latency bins of two significant digits (within
// 10% of the exact value), counted by the database.
func latencyGraph(c *call) (any, error) {
	s, f, bucket, err := c.series()
	if err != nil {
		return nil, err
	}
	bins, err := c.db.LatencyBins(c.r.Context(), f, bucket)
	if err != nil {
		return nil, err
	}
	all := make(map[int64]int64)
	for _, m := range bins {
		for v, n := range m {
			all[v] += n
		}
	}
	row := func(t *ledger.Totals, m map[int64]int64) map[string]any {
		return map[string]any{"avg": ratio(t.LatencyUS, t.Requests) / 1000,
			"p50": percentile(m, 0.50), "p90": percentile(m, 0.90), "p99": percentile(m, 0.99)}
	}
	g := &graphResponse{Summary: row(&s.all, all), Object: "analytics-graph"}
	for i := range s.points {
		p := row(&s.points[i].Totals, bins[s.points[i].Start.UnixMicro()])
		p["timestamp"] = s.points[i].Start.Format(time.RFC3339)
		g.DataPoints = append(g.DataPoints, p)
	}
	return g, nil
}

// percentile reads the q-th percentile, in milliseconds, from bins of
// latency in microseconds.
func percentile(bins map[int64]int64, q float64) float64 {
	var n int64
	for _, c := range bins {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for _, v := range slices.Sorted(maps.Keys(bins)) {
		seen += bins[v]
		if seen >= rank {
			return float64(v) / 1000
		}
	}
	return 0
}

// groupBy is one grouping of the groups API: a column, or a metadata
// key, and the name of the value in the answer.
type groupBy struct {
	column, metaKey, name string
	// prefix keeps the groups whose value starts with it.
	prefix string
}

// groupsResponse is the reference's grouped list.
type groupsResponse struct {
	Object string           `json:"object"`
	Total  int64            `json:"total"`
	Data   []map[string]any `json:"data"`
}

func groupHandler(g groupBy) handler {
	return func(c *call) (any, error) { return c.groups(g) }
}

func metadataGroups(c *call) (any, error) {
	key := c.r.PathValue("key")
	if !ledger.ValidMetadataKey(key) {
		return nil, apierror.BadRequest("metadataKey", "must be 1 to 64 letters, digits, '_', '-' or '.'")
	}
	return c.groups(groupBy{metaKey: key, name: "metadata_value"})
}

func (c *call) groups(g groupBy) (any, error) {
	f, err := c.filter(true)
	if err != nil {
		return nil, err
	}
	limit, offset, err := c.page()
	if err != nil {
		return nil, err
	}
	var (
		groups []ledger.Group
		total  int64
	)
	if g.prefix == "" {
		groups, total, err = c.db.Groups(c.r.Context(), f, g.column, g.metaKey, limit, offset)
	} else {
		groups, total, err = c.prefixGroups(f, g, limit, offset)
	}
	if err != nil {
		return nil, err
	}
	out := &groupsResponse{Object: "list", Total: total, Data: make([]map[string]any, 0, len(groups))}
	for i := range groups {
		t := &groups[i].Totals
		out.Data = append(out.Data, map[string]any{
			g.name: groups[i].Value, "requests": t.Requests, "cost": cents(t.CostNanoUSD), "cost_usd": usd(t.CostNanoUSD),
			"total_tokens": t.InputTokens + t.OutputTokens, "error_count": t.Errors,
			"success_rate": 100 * ratio(t.Requests-t.Errors, t.Requests), "avg_latency": ratio(t.LatencyUS, t.Requests) / 1000,
			"cache_hit_rate": 100 * ratio(t.SimpleHits+t.SemanticHits, t.Requests),
			"first_seen":     time.UnixMicro(t.FirstSeen).UTC().Format(time.RFC3339),
			"last_seen":      time.UnixMicro(t.LastSeen).UTC().Format(time.RFC3339),
			"object":         "analytics-group",
		})
	}
	return out, nil
}

// prefixGroups is Groups of the values starting with g.prefix. The
// grouped columns' values are bounded by configuration (keys and users),
// and Groups gathers every group before it cuts the page, so every group
// is read and the page cut after the prefix is applied.
func (c *call) prefixGroups(f *ledger.Filter, g groupBy, limit, offset int) ([]ledger.Group, int64, error) {
	all, _, err := c.db.Groups(c.r.Context(), f, g.column, "", math.MaxInt32, 0)
	if err != nil {
		return nil, 0, err
	}
	kept := all[:0]
	for _, gr := range all {
		if strings.HasPrefix(gr.Value, g.prefix) {
			kept = append(kept, gr)
		}
	}
	if offset >= len(kept) {
		return nil, int64(len(kept)), nil
	}
	return kept[offset:min(offset+limit, len(kept))], int64(len(kept)), nil
}
