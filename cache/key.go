package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
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
// parts, with the body in canonical form — JSON re-encoded with sorted
// keys and without "stream" and "stream_options", so a streamed request
// hits an answer stored from a non-streamed one and vice versa, and key
// order or spacing does not matter. It fails only for a body that is not
// a JSON object, which is not cached.
func Key(p KeyParts) (string, error) {
	body, err := canonicalJSON(p.Body, true)
	if err != nil {
		return "", err
	}
	part := "ns:" + p.Namespace
	if p.Namespace == "" {
		md := []byte(nil)
		if p.Metadata != "" {
			if md, err = canonicalJSON([]byte(p.Metadata), false); err != nil {
				md = []byte(p.Metadata)
			}
		}
		part = "md:" + string(md)
	}
	h := sha256.New()
	for _, s := range []string{"v1", p.Op, p.Method, p.Path, p.Target, p.Workspace, part} {
		writePart(h, []byte(s))
	}
	writePart(h, body)
	var sum [sha256.Size]byte
	return string(h.Sum(sum[:0])), nil
}

func writePart(w io.Writer, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	_, _ = w.Write(n[:])
	_, _ = w.Write(b)
}

var errNotObject = errors.New("not a JSON object")

// canonicalJSON decodes a JSON object, keeping numbers as written, and
// encodes it again: encoding/json writes map keys sorted.
func canonicalJSON(b []byte, dropStream bool) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errNotObject
	}
	if dec.More() {
		return nil, errNotObject
	}
	if dropStream {
		delete(m, "stream")
		delete(m, "stream_options")
	}
	return json.Marshal(m)
}
