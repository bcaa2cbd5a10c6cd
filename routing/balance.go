package routing

import (
	"math"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/cost"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/tokenest"
)

// Balancing modes of a loadbalance strategy (strategy.loadbalance).
const (
	// BalanceWeighted draws a target at random in proportion to its
	// weight: the spec's loadbalance, and the default.
	BalanceWeighted = "weighted"
	// BalanceLeastLatency sends the request to the target with the
	// lowest average time to first byte; targets within latencyBand of
	// it share by weight.
	BalanceLeastLatency = "least_latency"
	// BalanceLeastInflight draws two targets by weight and sends the
	// request to the one with fewer attempts in flight per unit of
	// weight (the power of two random choices).
	BalanceLeastInflight = "least_inflight"
	// BalanceCheapest sends the request to the target whose model costs
	// least for the request's estimated tokens; equal prices share by
	// weight.
	BalanceCheapest = "cheapest"
)

// Targets whose average time to first byte is within latencyBandRatio of
// the fastest one plus latencyBandSlack count as equally fast and share
// the traffic by weight: differences that small are noise, and sending
// everything to a target a millisecond faster would herd onto it.
const (
	latencyBandRatio = 1.2
	latencyBandSlack = 5e6 // 5 ms, in nanoseconds
)

// childSet is a set of a node's children by index: a word for nodes of
// up to 64 children, so a decision allocates nothing.
type childSet struct {
	small uint64
	big   []uint64
}

func newChildSet(n int) childSet {
	if n > 64 {
		return childSet{big: make([]uint64, (n+63)/64)}
	}
	return childSet{}
}

func (s *childSet) has(i int) bool {
	if s.big != nil {
		return s.big[i>>6]&(1<<(i&63)) != 0
	}
	return s.small&(1<<i) != 0
}

func (s *childSet) add(i int) {
	if s.big != nil {
		s.big[i>>6] |= 1 << (i & 63)
		return
	}
	s.small |= 1 << i
}

func (s *childSet) del(i int) {
	if s.big != nil {
		s.big[i>>6] &^= 1 << (i & 63)
		return
	}
	s.small &^= 1 << i
}

// pick returns the index of the child a loadbalance node sends the
// request to, among those with a weight above 0, not excluded and with a
// leaf whose breaker is not open; -1 when there is none. All-zero
// weights are a 400.
func (r *run) pick(n *Node, excluded *childSet) (int, error) {
	var total float64
	for _, c := range n.Children {
		total += max(c.Weight, 0)
	}
	if total <= 0 {
		return -1, apierror.BadRequest(n.Path+".targets", "%s: loadbalance needs at least one target with a weight above 0", n.Path)
	}
	cand := newChildSet(len(n.Children))
	total = 0
	count := 0
	for i, c := range n.Children {
		if c.Weight > 0 && !excluded.has(i) && r.available(c) {
			cand.add(i)
			total += c.Weight
			count++
		}
	}
	switch {
	case count == 0:
		return -1, nil
	case count == 1:
		return r.draw(n, &cand, total), nil
	}
	switch n.Strategy.LoadBalance {
	case BalanceLeastLatency:
		if r.rt.Loads != nil {
			return r.leastLatency(n, &cand, total), nil
		}
	case BalanceLeastInflight:
		if r.rt.Loads != nil {
			return r.leastInflight(n, &cand, total), nil
		}
	case BalanceCheapest:
		if r.rt.Prices != nil {
			return r.cheapest(n, &cand, total), nil
		}
	}
	return r.draw(n, &cand, total), nil
}

// draw returns a member of set chosen with probability proportional to
// its weight; total is the members' weights summed.
func (r *run) draw(n *Node, set *childSet, total float64) int {
	x := r.rt.Float() * total
	last := -1
	for i, c := range n.Children {
		if !set.has(i) {
			continue
		}
		if x < c.Weight {
			return i
		}
		x -= c.Weight
		last = i
	}
	return last // float rounding left x just above the last weight
}

// childLoad is what the measured modes read of one child: a leaf's own
// measurements, or for a nested group the lowest average among its
// measured leaves, the newest sample, the sum of its in-flight attempts
// and its stalest leaf (for probes).
type childLoad struct {
	latency  float64 // ns; 0 when no leaf was measured
	last     int64   // UnixNano of the newest sample; 0 when none
	inflight int64
	probe    *TargetLoad
}

func (r *run) childLoad(n *Node, out *childLoad) {
	if n.Target != nil {
		l := r.rt.Loads.Of(n.Target)
		last := l.lastSample.Load()
		if lat := float64(l.Latency()); lat > 0 && (out.latency == 0 || lat < out.latency) {
			out.latency = lat
		}
		out.last = max(out.last, last)
		out.inflight += l.inflight.Load()
		if out.probe == nil || last < out.probe.lastSample.Load() {
			out.probe = l
		}
		return
	}
	for _, c := range n.Children {
		r.childLoad(c, out)
	}
}

// leastLatency sends a probe to the candidate that has gone longest
// without a sample when that is ProbeAfter or more (or it was never
// measured), one probe at a time per target; otherwise it draws by
// weight among the measured candidates within the band of the fastest.
// Without any measurement it draws by weight among all.
func (r *run) leastLatency(n *Node, cand *childSet, total float64) int {
	now := r.rt.Loads.now().UnixNano()
	stalest, stalestLast := -1, int64(math.MaxInt64)
	var stalestLoad *TargetLoad
	best := math.Inf(1)
	for i, c := range n.Children {
		if !cand.has(i) {
			continue
		}
		var cl childLoad
		r.childLoad(c, &cl)
		if now-cl.last >= int64(ProbeAfter) && cl.last < stalestLast && now-cl.probe.probeAt.Load() >= int64(ProbeAfter) {
			stalest, stalestLast, stalestLoad = i, cl.last, cl.probe
		}
		if cl.latency > 0 && cl.latency < best {
			best = cl.latency
		}
	}
	if stalest >= 0 && stalestLoad.probe(now) {
		return stalest
	}
	if math.IsInf(best, 1) {
		return r.draw(n, cand, total)
	}
	band := best*latencyBandRatio + latencyBandSlack
	tied := newChildSet(len(n.Children))
	var tiedTotal float64
	for i, c := range n.Children {
		if !cand.has(i) {
			continue
		}
		var cl childLoad
		r.childLoad(c, &cl)
		if cl.latency > 0 && cl.latency <= band {
			tied.add(i)
			tiedTotal += c.Weight
		}
	}
	return r.draw(n, &tied, tiedTotal)
}

// leastInflight draws two distinct candidates by weight and keeps the
// one with fewer attempts in flight per unit of weight ((in flight + 1)
// ÷ weight), the first drawn on a tie.
func (r *run) leastInflight(n *Node, cand *childSet, total float64) int {
	a := r.draw(n, cand, total)
	cand.del(a)
	b := r.draw(n, cand, total-n.Children[a].Weight)
	if b < 0 {
		return a
	}
	var la, lb childLoad
	r.childLoad(n.Children[a], &la)
	r.childLoad(n.Children[b], &lb)
	if float64(lb.inflight+1)/n.Children[b].Weight < float64(la.inflight+1)/n.Children[a].Weight {
		return b
	}
	return a
}

// cheapest prices the request at each candidate: the catalog's price of
// the model the target runs (its override_params.model, else the
// request's model) for the estimated tokens (tokenest: the prompt's
// ⌈bytes/4⌉ and the client's output bound, else tokenest.DefaultOutput),
// a nested group at its cheapest leaf. It draws by weight among the
// cheapest; unpriced targets come after every priced one, and without
// any price it draws by weight among all.
func (r *run) cheapest(n *Node, cand *childSet, total float64) int {
	q := priceQuery{catalog: r.rt.Prices()}
	if q.catalog == nil {
		return r.draw(n, cand, total)
	}
	if r.req != nil {
		q.prompt, q.out = tokenest.Parts(r.req.Params, int64(len(r.req.Params)))
		q.model = gjson.GetBytes(r.req.Params, "model").Str
	}
	if q.out == 0 {
		q.out = tokenest.DefaultOutput
	}
	best := math.Inf(1)
	for i, c := range n.Children {
		if cand.has(i) {
			best = min(best, q.cost(c))
		}
	}
	if math.IsInf(best, 1) {
		return r.draw(n, cand, total)
	}
	tied := newChildSet(len(n.Children))
	var tiedTotal float64
	for i, c := range n.Children {
		// Equal prices computed the same way are equal floats; the
		// margin only absorbs the last bit of rounding.
		if cand.has(i) && q.cost(c) <= best*(1+1e-9) {
			tied.add(i)
			tiedTotal += c.Weight
		}
	}
	return r.draw(n, &tied, tiedTotal)
}

// priceQuery prices one request at the targets of a cheapest node.
type priceQuery struct {
	catalog     *cost.Catalog
	model       string // the request's model
	prompt, out int64
}

// cost returns what the request would cost at n (its cheapest leaf), +Inf
// when the catalog prices none of them.
func (q *priceQuery) cost(n *Node) float64 {
	if t := n.Target; t != nil {
		model := q.model
		if raw, ok := t.OverrideParams["model"]; ok {
			model = gjson.ParseBytes(raw).Str
		}
		p, ok := q.catalog.Price(t.Settings.Provider, model)
		if !ok {
			return math.Inf(1)
		}
		return p.Estimate(q.prompt, q.out)
	}
	c := math.Inf(1)
	for _, child := range n.Children {
		c = min(c, q.cost(child))
	}
	return c
}
