package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// KeyParts is everything that determines a cached answer.
type KeyParts struct {
	// Endpoint: the operation and the method and path it was called on.
	Op, Method, Path string
	// Target is the resolved upstream's identity (routing.Target.Identity:
	// provider, host, credential fingerprint — never the key itself), so
	// accounts and deployments never share answers.
	Target string
	// Workspace is the gateway key's workspace, so tenants never share
	// answers even through one provider credential.
	Workspace string
	// Body is the request body after override_params.
	Body []byte
	// Namespace is x-gateway-cache-namespace; when empty, Metadata (the
	// x-gateway-metadata JSON) partitions the cache instead.
	Namespace string
	Metadata  string
}

// Key returns the cache key for parts: a SHA-256 over the length-prefixed
// parts, with the body in canonical form — objects with their keys sorted,
// no insignificant whitespace, and without the top-level "stream" and
// "stream_options", so a streamed request hits an answer stored from a
// non-streamed one and vice versa, and key order or spacing does not
// matter. Scalars are kept as written (1.0 and 1 differ). It fails only
// for a body that is not a JSON object, which is not cached.
func Key(p KeyParts) (string, error) {
	// Bounded first: the canonical form is built by a recursive walk.
	if jsonlimit.Check(p.Body) != nil {
		return "", errNotObject
	}
	body := gjson.ParseBytes(p.Body)
	if !body.IsObject() {
		return "", errNotObject
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		buf.Reset()
		bufPool.Put(buf)
	}()
	for _, s := range []string{"v1", p.Op, p.Method, p.Path, p.Target, p.Workspace} {
		writePart(buf, s)
	}
	if p.Namespace != "" {
		writePart(buf, "ns:"+p.Namespace)
	} else {
		writePart(buf, "md:"+canonicalMetadata(p.Metadata))
	}
	// The body goes last, so it needs no length prefix.
	canonical(buf, body, true)
	sum := sha256.Sum256(buf.Bytes())
	return string(sum[:]), nil
}

// canonicalMetadata puts the metadata JSON in canonical form, so the
// order of its keys does not partition the cache.
func canonicalMetadata(md string) string {
	if md == "" || !gjson.Valid(md) {
		return md
	}
	var b bytes.Buffer
	canonical(&b, gjson.Parse(md), false)
	return b.String()
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writePart writes s with its length first, so parts cannot run into
// each other.
func writePart(b *bytes.Buffer, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	b.Write(n[:])
	b.WriteString(s)
}

var errNotObject = errors.New("not a JSON object")

type member struct {
	key, raw string
	val      gjson.Result
}

// canonical writes v with object keys sorted. dropStream removes the
// top-level stream fields only.
func canonical(b *bytes.Buffer, v gjson.Result, dropStream bool) {
	switch {
	case v.IsObject():
		var ms []member
		v.ForEach(func(k, val gjson.Result) bool {
			if !dropStream || (k.Str != "stream" && k.Str != "stream_options") {
				ms = append(ms, member{k.Str, k.Raw, val})
			}
			return true
		})
		slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
		b.WriteByte('{')
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(m.raw)
			b.WriteByte(':')
			canonical(b, m.val, false)
		}
		b.WriteByte('}')
	case v.IsArray():
		b.WriteByte('[')
		i := 0
		v.ForEach(func(_, val gjson.Result) bool {
			if i > 0 {
				b.WriteByte(',')
			}
			i++
			canonical(b, val, false)
			return true
		})
		b.WriteByte(']')
	default:
		b.WriteString(v.Raw)
	}
}
