package sqlkv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
)

// ImportMarker is the row that records the one-time import: once it is
// written, Import never copies again (a record deleted after the upgrade
// is not brought back from the old store).
const ImportMarker = "llm_gateway/records/imported"

// importLock serialises instances upgraded together: one imports, the
// others find its marker.
const importLock = "llm_gateway_records_import"

// Imported is the marker's content.
type Imported struct {
	From    string    `json:"from"`
	Records int       `json:"records"`
	At      time.Time `json:"at"`
}

// Import runs copy once for the whole database: under a lock shared by
// every instance, unless the marker says an import ran, then writes the
// marker with copy's count. It reports whether it copied now. A failed
// copy writes no marker, so the next start tries again (Copy never
// overwrites, so a partial copy is completed, not duplicated).
func (kv *KV) Import(ctx context.Context, from string, copy func(ctx context.Context) (int, error)) (bool, Imported, error) {
	if err := kv.Lock(ctx, importLock); err != nil {
		return false, Imported{}, err
	}
	defer func() { _ = kv.Unlock(context.WithoutCancel(ctx), importLock) }()
	var m Imported
	b, err := kv.Load(ctx, ImportMarker)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &m); err != nil {
			return false, m, fmt.Errorf("sqlkv: the import marker does not decode: %v", err)
		}
		return false, m, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, m, err
	}
	n, err := copy(ctx)
	if err != nil {
		return false, m, fmt.Errorf("sqlkv: importing from %s after %d records: %w", from, n, err)
	}
	m = Imported{From: from, Records: n, At: kv.now().UTC()}
	b, _ = json.Marshal(m)
	return true, m, kv.Store(ctx, ImportMarker, b)
}

// stater is the part of certmagic.Storage that tells a folder from a
// record.
type stater interface {
	Stat(ctx context.Context, key string) (certmagic.KeyInfo, error)
}

// Copy copies every record under the folder prefix of src (at any depth)
// and the single keys extra into kv, under the same keys with srcPrefix
// cut off their start and dstPrefix put in its place (a Redis key_prefix
// the records no longer carry). A key kv already holds is kept as it is:
// a record written in SQL wins over its old copy. It returns how many
// records it copied.
func (kv *KV) Copy(ctx context.Context, src kvstore.KV, prefix string, extra []string, srcPrefix, dstPrefix string) (int, error) {
	names, err := kvstore.ListKeys(ctx, src, prefix, true)
	if err != nil {
		return 0, fmt.Errorf("listing %s: %w", prefix, err)
	}
	n := 0
	for _, name := range append(names, extra...) {
		if last := name[strings.LastIndexByte(name, '/')+1:]; strings.HasPrefix(last, ".") {
			continue // an index of kvstore.Redis, or a temporary file
		}
		if st, ok := src.(stater); ok {
			// Caddy's file storage lists folders too.
			if info, err := st.Stat(ctx, name); err == nil && !info.IsTerminal {
				continue
			}
		}
		v, err := src.Load(ctx, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return n, fmt.Errorf("loading %s: %w", name, err)
		}
		dst := dstPrefix + strings.TrimPrefix(name, srcPrefix)
		ok, err := kv.CompareAndSwap(ctx, dst, nil, v)
		if err != nil {
			return n, fmt.Errorf("storing %s: %w", dst, err)
		}
		if ok {
			n++
		}
	}
	return n, nil
}
