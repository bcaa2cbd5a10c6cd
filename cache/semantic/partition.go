package semantic

import (
	"encoding/hex"
	"errors"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/cache"
)

// Partition identifies the requests that may share answers. Similarity is
// computed only between requests of one partition: isolation is a hard
// equality, never a property of the embedded text.
type Partition string

// PartitionParts is everything besides the body that must match for two
// requests to share an answer.
type PartitionParts struct {
	// Op, Method and Path: the operation and the endpoint it was called
	// on, as for the exact cache key.
	Op, Method, Path string
	// Workspace is the gateway key's workspace.
	Workspace string
	// Namespace is x-gateway-cache-namespace; when empty, Metadata (the
	// x-gateway-metadata JSON) partitions instead, as in the exact cache,
	// so a semantic hit never crosses a boundary the exact cache keeps.
	Namespace, Metadata string
	// Target is the resolved upstream's identity (routing.Target.Identity).
	Target string
	// Model is the model the upstream is asked for, after routing.
	Model string
	// Embedder identifies the embedding target and model: vectors of
	// different embedding models are not comparable.
	Embedder string
}

// ErrNotEligible is returned by PartitionKey for a body the semantic
// cache does not handle (see EmbedText).
var ErrNotEligible = errors.New("request not eligible for the semantic cache")

// PartitionKey returns the partition of a chat or text-completion request:
// a SHA-256 over parts and over every request parameter except the text
// that is embedded — the body's canonical form (sorted keys, "stream" and
// "stream_options" dropped, see cache.Key) with the embedded turns or the
// prompt removed. The system prompt and the turns before the last
// MaxTurns are therefore part of the partition, as are model,
// temperature, tools, response_format and every other field.
func PartitionKey(p PartitionParts, body []byte) (Partition, error) {
	_, rest, ok := split(body)
	if !ok {
		return "", ErrNotEligible
	}
	return partitionOf(p, rest)
}

// Prepare returns both the partition and the text to embed, parsing the
// body once.
func Prepare(p PartitionParts, body []byte) (Partition, string, error) {
	text, rest, ok := split(body)
	if !ok {
		return "", "", ErrNotEligible
	}
	part, err := partitionOf(p, rest)
	return part, text, err
}

func partitionOf(p PartitionParts, rest []byte) (Partition, error) {
	// cache.Key hashes length-prefixed parts and the canonical body; the
	// prefixes "semantic:" keep a partition from ever equalling an exact
	// key, and the model and embedder ride in the target part.
	k, err := cache.Key(cache.KeyParts{
		Op:        "semantic:" + p.Op,
		Method:    p.Method,
		Path:      p.Path,
		Target:    lenPrefixed(p.Target, p.Model, p.Embedder),
		Workspace: p.Workspace,
		Namespace: p.Namespace,
		Metadata:  p.Metadata,
		Body:      rest,
	})
	if err != nil {
		return "", err
	}
	return Partition(hex.EncodeToString([]byte(k))), nil
}

// lenPrefixed joins parts so that no choice of values makes two different
// lists join equal.
func lenPrefixed(parts ...string) string {
	var b []byte
	for _, s := range parts {
		n := len(s)
		b = append(b, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		b = append(b, s...)
	}
	return string(b)
}
