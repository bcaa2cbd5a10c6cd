package logfilter

import (
	"sync"

	"go.uber.org/zap/zapcore"
)

// walker holds the masking nodes of one top-level call into the encoder
// (EncodeEntry for an entry's fields, AddObject or AddArray for a With
// field), so that walking an entry allocates none of them. A node is
// taken when an object or array is handed to the real encoder and given
// back when that encoder returns: zap's encoders marshal an object or
// array inside the call that receives it, so nodes are taken and given
// back in stack order and the slabs below work as stacks. A call that
// needs more nodes than a slab holds gets the rest from the heap.
type walker struct {
	s *Secrets
	// fields is EncodeEntry's copy of the entry's fields.
	fields []zapcore.Field
	objs   slab[objNode]
	masked slab[maskedObject]
	arrs   slab[arrNode]
}

var walkers = sync.Pool{New: func() any { return new(walker) }}

// getWalker returns an empty walker for s, to give back with release.
func getWalker(s *Secrets) *walker {
	w := walkers.Get().(*walker)
	w.s = s
	return w
}

// release empties w, so that the pool keeps no value of the entry alive,
// and gives it back.
func (w *walker) release() {
	clear(w.fields)
	if cap(w.fields) > maxPooledFields {
		w.fields = nil
	}
	w.fields = w.fields[:0]
	w.objs.reset()
	w.masked.reset()
	w.arrs.reset()
	w.s = nil
	walkers.Put(w)
}

// maxPooledFields bounds the field copies a pooled walker keeps.
const maxPooledFields = 64

// slabSize is the number of nodes of each kind a walker holds: enough for
// the deepest and widest entries Caddy and the gateway log (the access
// log's llm object nests an array of objects in an object), with room.
const slabSize = 8

// slab is a stack of nodes of one kind.
type slab[T any] struct {
	n     int
	items [slabSize]T
}

// get takes a node, zeroed; from the heap when the slab is used up.
func (s *slab[T]) get() *T {
	if s.n < len(s.items) {
		s.n++
		return &s.items[s.n-1]
	}
	return new(T)
}

// put gives back the node last taken (a node from the heap is left to the
// collector), zeroing it.
func (s *slab[T]) put(p *T) {
	if s.n > 0 && p == &s.items[s.n-1] {
		s.n--
		var zero T
		*p = zero
	}
}

// reset gives back every node.
func (s *slab[T]) reset() {
	clear(s.items[:s.n])
	s.n = 0
}
