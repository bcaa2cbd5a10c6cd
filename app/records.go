package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/kvstore"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/sqlkv"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/policies"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/prompts"
)

// Where the control plane's records (API keys, virtual keys, configs,
// prompts, rate-limit and usage-limit policies, the audit log) live: the
// "records" option of the llm app (docs/keys.md).
const (
	// RecordsSQL keeps them in SQL (internal/sqlkv): the ledger's
	// PostgreSQL, or a SQLite file beside the ledger's. The default when
	// a ledger is configured.
	RecordsSQL = "sql"
	// RecordsStorage keeps them in Caddy's storage.
	RecordsStorage = "storage"
	// RecordsRedis keeps them in Redis (the default with redis and no
	// ledger, as before records moved to SQL).
	RecordsRedis = "redis"
)

// recordsFile is the embedded records database, in the folder of the
// ledger's SQLite file (or Caddy's data directory): a file of its own, so
// record writes never wait behind the ledger's writer.
const recordsFile = "llm-records.db"

// recordsState adds "records" and the store the choice opens.
type recordsState struct {
	// Records is where the control plane's records live: "sql",
	// "storage" or "redis". Empty: sql when a ledger is configured (on
	// an on-disk SQLite file or PostgreSQL), else redis when redis is
	// configured, else storage.
	Records string `json:"records,omitempty"`

	// records is the store the record stores use (a.storage, or the
	// SQL KV); recordsSQL is the SQL KV when records are in SQL;
	// recordsKey is its pool key.
	records      certmagic.Storage
	recordsSQL   *sqlkv.KV
	recordsKey   string
	recordsRedis bool
}

// recordsDBs holds the process's open record databases, so a reload
// keeps the connections.
var recordsDBs = caddy.NewUsagePool()

type pooledRecords struct{ *sqlkv.KV }

func (p pooledRecords) Destruct() error { return p.Close() }

// recordsMode is where the records live for this config.
func (a *App) recordsMode() (string, error) {
	switch a.Records {
	case "":
		switch {
		case a.Ledger != nil && a.Ledger.DSN != ":memory:":
			return RecordsSQL, nil
		case a.Redis != nil:
			return RecordsRedis, nil
		}
		return RecordsStorage, nil
	case RecordsSQL, RecordsStorage:
		return a.Records, nil
	case RecordsRedis:
		if a.Redis == nil {
			return "", errors.New("records redis needs a redis block")
		}
		return RecordsRedis, nil
	}
	return "", fmt.Errorf("records must be sql, storage or redis, not %q", a.Records)
}

// recordsDSN is where SQL records live: the ledger's PostgreSQL URL, else
// recordsFile in the folder of the ledger's SQLite file (Caddy's data
// directory without a ledger).
func (a *App) recordsDSN() (string, error) {
	dsn := ""
	if a.Ledger != nil {
		dsn = caddy.NewReplacer().ReplaceAll(a.Ledger.DSN, "")
		if strings.Contains(a.Ledger.DSN, "{") && dsn == "" {
			return "", errors.New("the ledger's database placeholder is empty (is its environment variable set?)")
		}
	}
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return dsn, nil
	case dsn == ":memory:":
		return "", errors.New("records sql needs a ledger on disk or PostgreSQL (the ledger is in memory)")
	case dsn == "":
		return filepath.Join(caddy.AppDataDir(), recordsFile), nil
	}
	return filepath.Join(filepath.Dir(dsn), recordsFile), nil
}

// provisionRecords opens the record store. It runs in provisionShared
// after Redis is set up, before the stores that use it.
func (a *App) provisionRecords() error {
	mode, err := a.recordsMode()
	if err != nil {
		return err
	}
	a.records, a.recordsRedis = a.storage, mode == RecordsRedis
	if mode != RecordsSQL {
		return nil
	}
	dsn, err := a.recordsDSN()
	if err != nil {
		return fmt.Errorf("records: %v", err)
	}
	from, copyOld := a.importer()
	// The pool key is a digest (the DSN may hold a password) of the
	// database and of what an import would read.
	sum := sha256.Sum256([]byte(dsn + "|" + from))
	key := "records|" + hex.EncodeToString(sum[:])
	logger := a.logger.Named("records")
	v, _, err := recordsDBs.LoadOrNew(key, func() (caddy.Destructor, error) {
		kv, err := sqlkv.Open(dsn)
		if err != nil {
			return nil, err
		}
		kv.OnConnect(func(ctx context.Context) error {
			done, m, err := kv.Import(ctx, from, func(ctx context.Context) (int, error) { return copyOld(ctx, kv) })
			if done {
				logger.Info("records imported into SQL once", zap.String("from", m.From), zap.Int("records", m.Records),
					zap.String("database", kv.String()))
			}
			return err
		})
		ctx, cancel := context.WithTimeout(context.Background(), connectWait)
		defer cancel()
		if err := kv.Connect(ctx); err != nil {
			// The stores retry (keys are refused until it answers), as
			// the ledger does while its PostgreSQL is away.
			logger.Warn("records database unavailable; the record stores retry until it answers",
				zap.String("database", kv.String()), zap.Error(err))
		}
		return pooledRecords{kv}, nil
	})
	if err != nil {
		return fmt.Errorf("records: %v", err)
	}
	a.recordsKey, a.recordsSQL = key, v.(pooledRecords).KV
	a.records = a.recordsSQL
	return nil
}

// cleanupRecords releases the record database when no config uses it.
func (a *App) cleanupRecords() {
	if a.recordsKey != "" {
		_, _ = recordsDBs.Delete(a.recordsKey)
		a.recordsKey = ""
	}
}

// importer returns what the one-time import reads (today's layout: Redis
// when redis is configured, else Caddy's storage) and the copy into SQL.
func (a *App) importer() (string, func(ctx context.Context, dst *sqlkv.KV) (int, error)) {
	p := a.RedisKeyPrefix()
	if client := a.redis; client != nil {
		from := "redis " + a.redisKey + " prefix " + p
		return from, func(ctx context.Context, dst *sqlkv.KV) (int, error) { return importRedis(ctx, dst, client, p) }
	}
	storage := a.storage
	from := fmt.Sprintf("storage %T", storage)
	return from, func(ctx context.Context, dst *sqlkv.KV) (int, error) { return importStorage(ctx, dst, storage) }
}

// recordFolders are the folders the record stores keep in a KV, under
// the same names in SQL.
var recordFolders = []string{"llm_gateway/keys", "llm_gateway/prompts", "llm_gateway/policies", "llm/usage-limits"}

// importStorage copies today's records from Caddy's storage.
func importStorage(ctx context.Context, dst *sqlkv.KV, src certmagic.Storage) (int, error) {
	total := 0
	for _, f := range recordFolders {
		n, err := dst.Copy(ctx, src, f, nil, "", "")
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// importRedis copies today's records from Redis: the keys store's KV
// records under the key prefix (and its server secret, a plain key), the
// usage limits' KV records, and the prompts and rate-limit policies kept
// in Redis hashes, which are written as their storage stores write them.
// The change counter stays in Redis: it is the change feed.
func importRedis(ctx context.Context, dst *sqlkv.KV, client redis.UniversalClient, p string) (int, error) {
	keysPrefix := p + "llm_gateway/keys"
	total, err := dst.Copy(ctx, kvstore.NewRedis(client, 0), keysPrefix, []string{keysPrefix + "/server_secret"}, "", "")
	if err != nil {
		return total, err
	}
	n, err := dst.Copy(ctx, kvstore.NewRedis(client, 0).WithPrefix(p), "llm/usage-limits", nil, "", "")
	total += n
	if err != nil {
		return total, err
	}
	ps, err := prompts.NewRedisStore(client, promptsNamespace(p)).Load(ctx)
	if err != nil {
		return total, fmt.Errorf("reading prompts: %w", err)
	}
	for _, pr := range ps {
		n, err := storeNew(ctx, dst, "llm_gateway/prompts/"+pr.ID+".json", pr)
		total += n
		if err != nil {
			return total, err
		}
	}
	pols, err := policies.NewRedisStore(client, policies.StoreConfig{Namespace: p + "llmgw:policies"}).List(ctx, "")
	if err != nil {
		return total, fmt.Errorf("reading rate-limit policies: %w", err)
	}
	for _, pol := range pols {
		n, err := storeNew(ctx, dst, "llm_gateway/policies/"+pol.ID+".json", pol)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// storeNew writes v as JSON under key unless key is already stored.
func storeNew(ctx context.Context, dst *sqlkv.KV, key string, v any) (int, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	ok, err := dst.CompareAndSwap(ctx, key, nil, b)
	if ok {
		return 1, err
	}
	return 0, err
}

// promptsNamespace is the Redis hash of API prompts under key prefix p.
func promptsNamespace(p string) string {
	if p == "" {
		return ""
	}
	return p + "llmgw:prompts"
}

// unmarshalRecords parses `records sql|storage|redis`.
func (a *App) unmarshalRecords(d *caddyfile.Dispenser) error {
	if !d.Args(&a.Records) || d.NextArg() {
		return d.ArgErr()
	}
	switch a.Records {
	case RecordsSQL, RecordsStorage, RecordsRedis:
		return nil
	}
	return d.Errf("records must be sql, storage or redis, not %q", a.Records)
}

// recordsPollTTL is how long the prompt and policy stores serve their
// cached records before reading SQL again when records are in SQL: the
// bound on how long another instance's change takes to apply (the key
// store's changes come through Redis or its change counter at once).
const recordsPollTTL = time.Second
