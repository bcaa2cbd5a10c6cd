package keys

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/identity"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Errors of the write operations; the API maps them to statuses.
var (
	ErrNotFound = errors.New("keys: no such record")
	ErrConflict = errors.New("keys: the slug is taken in this workspace")
	ErrNoSealer = errors.New("keys: no encryption_key is configured, so provider keys cannot be stored encrypted")
	// ErrVersionConflict: the record changed (on this instance or another)
	// between the read a write started from and its store; nothing was
	// stored. Read it again and retry.
	ErrVersionConflict = errors.New("keys: the record was changed by another write at the same time")
	// ErrIdempotencyMismatch: an Idempotency-Key already used for a call
	// with other parameters.
	ErrIdempotencyMismatch = errors.New("keys: the Idempotency-Key was used for a call with other parameters")
	// ErrRevoked: a revoked key cannot be rotated.
	ErrRevoked = errors.New("keys: the key is revoked")
	// ErrPrecondition: the stored record is not at the version the write
	// was made on condition of (an If-Match); nothing was stored.
	ErrPrecondition = errors.New("keys: the record is not at the version the write names")
)

// Precondition is a condition a write makes on the version of the stored
// record it starts from (the API's If-Match), checked inside the write's
// compare-and-set: a write whose condition fails stores nothing and
// answers ErrPrecondition, and one whose record changes after the check
// fails its swap (ErrVersionConflict).
type Precondition func(version int64) bool

// checkPre applies pre to the stored version v.
func checkPre(pre []Precondition, v int64) error {
	for _, p := range pre {
		if p != nil && !p(v) {
			return ErrPrecondition
		}
	}
	return nil
}

// NewID returns a time-ordered record id (UUIDv7), so ids sort by
// creation and serve as list cursors.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// loadRecord reads the stored version of a record, the one a write starts
// from (memory may lag another instance's write by up to a poll), and
// returns its bytes, which the write's swap compares.
func (s *Store) loadRecord(ctx context.Context, kind, id string, into any) ([]byte, error) {
	if uuid.Validate(id) != nil {
		return nil, ErrNotFound
	}
	data, err := s.opts.KV.Load(ctx, s.recordKey(kind, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return data, json.Unmarshal(data, into)
}

// CreateAPIKey stores r as a new key and returns the key, the only time
// it exists outside the client. r's ID, digest, prefix, status and times
// are set here.
func (s *Store) CreateAPIKey(ctx context.Context, r *APIKey) (string, error) {
	if err := checkKeyName(r.Name); err != nil {
		return "", err
	}
	h := s.Hasher()
	if h == nil || !s.Ready() {
		return "", ErrNotReady
	}
	key := NewKey()
	now := s.now()
	r.ID, r.Digest, r.Prefix, r.Version = NewID(), h.Sum(key).String(), key[:DisplayLen], 1
	if r.Status == "" {
		r.Status = StatusActive
	}
	r.CreatedAt, r.UpdatedAt = now, now
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return key, s.swap(ctx, kindAPIKeys, r.ID, nil, r)
}

// UpdateAPIKey applies fn to the stored key record id and stores it over
// the version it read: when another write (here or on another instance)
// landed in between, nothing is stored and the error is
// ErrVersionConflict, so an edit never writes a revoked key back active.
func (s *Store) UpdateAPIKey(ctx context.Context, id string, fn func(*APIKey) error, pre ...Precondition) (*APIKey, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	r := new(APIKey)
	old, err := s.loadRecord(ctx, kindAPIKeys, id, r)
	if err != nil {
		return nil, err
	}
	if err := checkPre(pre, r.Version); err != nil {
		return nil, err
	}
	before := r.Name
	if err := fn(r); err != nil {
		return nil, err
	}
	if r.Name != before {
		if err := checkKeyName(r.Name); err != nil {
			return nil, err
		}
	}
	r.UpdatedAt = s.now()
	r.Version++
	return r, s.swap(ctx, kindAPIKeys, r.ID, old, r)
}

// checkKeyName refuses a key name reserved for identity-provider users
// (identity.ReservedName): every way a key record is written (create,
// rename, import) passes here, so no key shares a user's rate limits,
// budgets or ledger name.
func checkKeyName(name string) error {
	if !identity.ReservedName(name) {
		return nil
	}
	e := apierror.Newf(http.StatusBadRequest, apierror.TypeInvalidRequest,
		"a key name may not start with %q: names so are those of identity-provider users (docs/identity.md)", identity.UserPrefix).WithCode("name_reserved")
	e.Param = "name"
	return e
}

// revokeAttempts bounds RevokeAPIKey's retries; each conflict means
// another write was stored, so this is only reached under a storm.
const revokeAttempts = 8

// RevokeAPIKey revokes key id (its previous secret and replay record go
// too). A revocation does not depend on what it read, so a concurrent
// write makes it start again from the stored record instead of failing:
// it is stored after any write it raced, and none is stored over it.
// With a precondition it is checked again on each attempt, so a write it
// raced refuses it (ErrPrecondition) instead.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, pre ...Precondition) (*APIKey, error) {
	for i := 0; ; i++ {
		r, err := s.UpdateAPIKey(ctx, id, func(r *APIKey) error {
			r.Status, r.PrevDigest, r.PrevUntil, r.Rotation = StatusRevoked, "", nil, nil
			return nil
		}, pre...)
		if !errors.Is(err, ErrVersionConflict) || i+1 == revokeAttempts {
			return r, err
		}
	}
}

// RotateAPIKey gives key id a new secret; the old one keeps working for
// grace. With an idemKey, a repeated call with the same one (on any
// instance) answers the same new key and changes nothing (replayed is
// true); one with another grace fails with ErrIdempotencyMismatch. The
// Idempotency-Key is claimed by the rotation's own swap: of two instances
// given it at once, one stores its rotation and the other, refused, reads
// that rotation back and answers its key. pre is checked after the
// replay: a retry of a rotation made answers its key although the version
// it named is gone.
func (s *Store) RotateAPIKey(ctx context.Context, id, idemKey string, grace time.Duration, pre ...Precondition) (key string, r *APIKey, replayed bool, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	h := s.Hasher()
	if h == nil || !s.Ready() {
		return "", nil, false, ErrNotReady
	}
	idemDigest, params := "", ""
	if idemKey != "" {
		idemDigest = h.Sum("idempotency\x00" + idemKey).String()
		params = h.Sum("rotate api key\x00" + id + "\x00" + strconv.FormatInt(grace.Milliseconds(), 10)).String()
	}
	for attempt := 0; ; attempt++ {
		r = new(APIKey)
		old, err := s.loadRecord(ctx, kindAPIKeys, id, r)
		if err != nil {
			return "", nil, false, err
		}
		if rot := r.Rotation; idemKey != "" && rot != nil && rot.IdemDigest == idemDigest {
			if rot.Params != "" && rot.Params != params {
				return "", nil, false, ErrIdempotencyMismatch
			}
			if k, ok := openReplay(h, idemKey, r.ID, rot.Box); ok {
				return k, r, true, nil
			}
		}
		if r.Status == StatusRevoked {
			return "", nil, false, ErrRevoked
		}
		if err := checkPre(pre, r.Version); err != nil {
			return "", nil, false, err
		}
		if attempt > 0 {
			// The write that beat ours was not this call's twin.
			return "", nil, false, ErrVersionConflict
		}
		key = NewKey()
		now := s.now()
		until := now.Add(grace)
		r.PrevDigest, r.PrevUntil = r.Digest, &until
		r.Digest, r.Prefix = h.Sum(key).String(), key[:DisplayLen]
		r.Rotation = nil
		if idemKey != "" {
			r.Rotation = &Rotation{IdemDigest: idemDigest, Params: params, Box: sealReplay(h, idemKey, r.ID, key), At: now}
		}
		r.UpdatedAt = now
		r.Version++
		err = s.swap(ctx, kindAPIKeys, r.ID, old, r)
		if !errors.Is(err, ErrVersionConflict) || idemKey == "" {
			return key, r, false, err
		}
	}
}

// secrets are the credential fields of provider settings, the part of a
// virtual key that is sealed.
type secrets struct {
	APIKey                   string          `json:"api_key,omitempty"`
	CloudASecretAccessKey    string          `json:"clouda_secret_access_key,omitempty"`
	CloudASessionToken       string          `json:"clouda_session_token,omitempty"`
	CloudCServiceAccountJSON json.RawMessage `json:"cloudc_service_account_json,omitempty"`
}

// split moves the credentials out of st.
func split(st *providers.Settings) secrets {
	sec := secrets{st.APIKey, st.CloudASecretAccessKey, st.CloudASessionToken, st.CloudCServiceAccountJSON}
	st.APIKey, st.CloudASecretAccessKey, st.CloudASessionToken, st.CloudCServiceAccountJSON = "", "", "", nil
	return sec
}

func (sec *secrets) apply(st *providers.Settings) {
	st.APIKey, st.CloudASecretAccessKey, st.CloudASessionToken, st.CloudCServiceAccountJSON =
		sec.APIKey, sec.CloudASecretAccessKey, sec.CloudASessionToken, sec.CloudCServiceAccountJSON
}

func (sec *secrets) empty() bool {
	return sec.APIKey == "" && sec.CloudASecretAccessKey == "" && sec.CloudASessionToken == "" && len(sec.CloudCServiceAccountJSON) == 0
}

// seal stores full's credentials in r, encrypted, and the rest in clear.
func (s *Store) seal(r *VirtualKey, full providers.Settings) error {
	sec := split(&full)
	r.Settings, r.Sealed, r.KeyHint = full, nil, hint(sec.APIKey)
	if sec.empty() {
		return nil
	}
	if s.opts.Sealer == nil {
		return ErrNoSealer
	}
	plain, err := json.Marshal(sec)
	if err != nil {
		return err
	}
	r.Sealed = s.opts.Sealer.Seal(plain, []byte(r.ID))
	return nil
}

// hint keeps two characters at each end of a long provider key.
func hint(k string) string {
	if len(k) < 16 {
		return ""
	}
	return k[:2] + "****" + k[len(k)-2:]
}

// CreateVirtualKey stores r with full's credentials sealed. The slug must
// be free in r's workspace.
func (s *Store) CreateVirtualKey(ctx context.Context, r *VirtualKey, full providers.Settings) error {
	now := s.now()
	r.ID, r.CreatedAt, r.UpdatedAt, r.Version = NewID(), now, now, 1
	if r.Status == "" {
		r.Status = StatusActive
	}
	if err := s.seal(r, full); err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	// A record this instance knows (one written before slugs were
	// claimed included), then the claim that decides between instances.
	if _, taken := s.VirtualKeyRecord(r.WorkspaceID, r.Slug); taken {
		return ErrConflict
	}
	claimed, err := s.claimSlug(ctx, kindVirtualKeys, r.WorkspaceID, r.Slug, r.ID)
	if err != nil {
		return err
	}
	if !claimed {
		return ErrConflict
	}
	if err := s.swap(ctx, kindVirtualKeys, r.ID, nil, r); err != nil {
		_ = s.releaseSlug(context.WithoutCancel(ctx), kindVirtualKeys, r.WorkspaceID, r.Slug, r.ID)
		return err
	}
	return nil
}

// UpdateVirtualKey applies fn to the stored virtual key id and its
// decrypted settings, and stores both (credentials sealed again) over the
// version it read, or fails with ErrVersionConflict (see UpdateAPIKey).
func (s *Store) UpdateVirtualKey(ctx context.Context, id string, fn func(*VirtualKey, *providers.Settings) error, pre ...Precondition) (*VirtualKey, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.updateVK(ctx, id, func(r *VirtualKey, st *providers.Settings) error {
		if err := checkPre(pre, r.Version); err != nil {
			return err
		}
		return fn(r, st)
	})
}

// updateVK is UpdateVirtualKey under writeMu.
func (s *Store) updateVK(ctx context.Context, id string, fn func(*VirtualKey, *providers.Settings) error) (*VirtualKey, error) {
	r := new(VirtualKey)
	old, err := s.loadRecord(ctx, kindVirtualKeys, id, r)
	if err != nil {
		return nil, err
	}
	full := s.open(r)
	if full == nil {
		return nil, errors.New("keys: the stored credentials do not open with the configured encryption keys")
	}
	st := *full
	if err := fn(r, &st); err != nil {
		return nil, err
	}
	if err := s.seal(r, st); err != nil {
		return nil, err
	}
	r.UpdatedAt = s.now()
	r.Version++
	return r, s.swap(ctx, kindVirtualKeys, r.ID, old, r)
}

// RotateVirtualKey replaces virtual key id's provider key with key. With
// an idemKey, a repeated call with the same one (on any instance) changes
// nothing (replayed is true), and one with another key fails with
// ErrIdempotencyMismatch; as for RotateAPIKey, the claim of the
// Idempotency-Key is the rotation's own swap.
func (s *Store) RotateVirtualKey(ctx context.Context, id, idemKey, key string, pre ...Precondition) (r *VirtualKey, replayed bool, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	h := s.Hasher()
	if h == nil || !s.Ready() {
		return nil, false, ErrNotReady
	}
	idemDigest, params := "", ""
	if idemKey != "" {
		idemDigest = h.Sum("idempotency\x00" + idemKey).String()
		params = h.Sum("rotate virtual key\x00" + id + "\x00" + key).String()
	}
	for attempt := 0; ; attempt++ {
		var twin *VirtualKey
		r, err = s.updateVK(ctx, id, func(r *VirtualKey, st *providers.Settings) error {
			if rot := r.Rotation; idemKey != "" && rot != nil && rot.IdemDigest == idemDigest {
				if rot.Params != "" && rot.Params != params {
					return ErrIdempotencyMismatch
				}
				twin = r
				return errReplay
			}
			if err := checkPre(pre, r.Version); err != nil {
				return err
			}
			if attempt > 0 {
				return ErrVersionConflict
			}
			st.APIKey = key
			r.Rotation = nil
			if idemKey != "" {
				r.Rotation = &Rotation{IdemDigest: idemDigest, Params: params, At: s.now()}
			}
			return nil
		})
		switch {
		case twin != nil:
			return twin, true, nil
		case errors.Is(err, ErrVersionConflict) && idemKey != "" && attempt == 0:
			continue
		}
		return r, false, err
	}
}

// errReplay ends an update that finds its call already made.
var errReplay = errors.New("keys: replay")

// DeleteVirtualKey removes virtual key id. With a precondition the
// record is deleted only while it is still the version read and checked
// (kvstore.CompareAndDelete): one changed in between is ErrPrecondition.
func (s *Store) DeleteVirtualKey(ctx context.Context, id string, pre ...Precondition) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	r := new(VirtualKey)
	old, err := s.loadRecord(ctx, kindVirtualKeys, id, r)
	if err != nil {
		return err
	}
	if err := checkPre(pre, r.Version); err != nil {
		return err
	}
	if len(pre) == 0 {
		old = nil // unconditional, as before
	}
	if err := s.removeIf(ctx, kindVirtualKeys, id, old); err != nil {
		return err
	}
	return s.releaseSlug(ctx, kindVirtualKeys, r.WorkspaceID, r.Slug, id)
}
