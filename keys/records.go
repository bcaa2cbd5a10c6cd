package keys

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"time"

	"github.com/google/uuid"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Errors of the write operations; the API maps them to statuses.
var (
	ErrNotFound = errors.New("keys: no such record")
	ErrConflict = errors.New("keys: the slug is taken in this workspace")
	ErrNoSealer = errors.New("keys: no encryption_key is configured, so provider keys cannot be stored encrypted")
)

// NewID returns a time-ordered record id (UUIDv7), so ids sort by
// creation and serve as list cursors.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// loadRecord reads the stored version of a record, the one a write starts
// from (memory may lag another instance's write by up to a poll).
func (s *Store) loadRecord(ctx context.Context, kind, id string, into any) error {
	if uuid.Validate(id) != nil {
		return ErrNotFound
	}
	data, err := s.opts.KV.Load(ctx, s.recordKey(kind, id))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(data, into)
}

// CreateAPIKey stores r as a new key and returns the key, the only time
// it exists outside the client. r's ID, digest, prefix, status and times
// are set here.
func (s *Store) CreateAPIKey(ctx context.Context, r *APIKey) (string, error) {
	h := s.Hasher()
	if h == nil || !s.Ready() {
		return "", ErrNotReady
	}
	key := NewKey()
	now := s.now()
	r.ID, r.Digest, r.Prefix = NewID(), h.Sum(key).String(), key[:DisplayLen]
	if r.Status == "" {
		r.Status = StatusActive
	}
	r.CreatedAt, r.UpdatedAt = now, now
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return key, s.write(ctx, kindAPIKeys, r.ID, r)
}

// UpdateAPIKey applies fn to the stored key record id and stores it.
func (s *Store) UpdateAPIKey(ctx context.Context, id string, fn func(*APIKey) error) (*APIKey, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	r := new(APIKey)
	if err := s.loadRecord(ctx, kindAPIKeys, id, r); err != nil {
		return nil, err
	}
	if err := fn(r); err != nil {
		return nil, err
	}
	r.UpdatedAt = s.now()
	return r, s.write(ctx, kindAPIKeys, r.ID, r)
}

// RotateAPIKey gives key id a new secret; the old one keeps working for
// grace. With an idemKey, a repeated call with the same one answers the
// same new key and changes nothing (replayed is true).
func (s *Store) RotateAPIKey(ctx context.Context, id, idemKey string, grace time.Duration) (key string, r *APIKey, replayed bool, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	h := s.Hasher()
	if h == nil || !s.Ready() {
		return "", nil, false, ErrNotReady
	}
	r = new(APIKey)
	if err := s.loadRecord(ctx, kindAPIKeys, id, r); err != nil {
		return "", nil, false, err
	}
	idemDigest := ""
	if idemKey != "" {
		idemDigest = h.Sum("idempotency\x00" + idemKey).String()
		if rot := r.Rotation; rot != nil && rot.IdemDigest == idemDigest {
			if k, ok := openReplay(idemKey, r.ID, rot.Box); ok {
				return k, r, true, nil
			}
		}
	}
	key = NewKey()
	now := s.now()
	until := now.Add(grace)
	r.PrevDigest, r.PrevUntil = r.Digest, &until
	r.Digest, r.Prefix = h.Sum(key).String(), key[:DisplayLen]
	r.Rotation = nil
	if idemKey != "" {
		r.Rotation = &Rotation{IdemDigest: idemDigest, Box: sealReplay(idemKey, r.ID, key), At: now}
	}
	r.UpdatedAt = now
	return key, r, false, s.write(ctx, kindAPIKeys, r.ID, r)
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
	r.ID, r.CreatedAt, r.UpdatedAt = NewID(), now, now
	if r.Status == "" {
		r.Status = StatusActive
	}
	if err := s.seal(r, full); err != nil {
		return err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, taken := s.VirtualKeyRecord(r.WorkspaceID, r.Slug); taken {
		return ErrConflict
	}
	return s.write(ctx, kindVirtualKeys, r.ID, r)
}

// UpdateVirtualKey applies fn to the stored virtual key id and its
// decrypted settings, and stores both (credentials sealed again).
func (s *Store) UpdateVirtualKey(ctx context.Context, id string, fn func(*VirtualKey, *providers.Settings) error) (*VirtualKey, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	r := new(VirtualKey)
	if err := s.loadRecord(ctx, kindVirtualKeys, id, r); err != nil {
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
	return r, s.write(ctx, kindVirtualKeys, r.ID, r)
}

// DeleteVirtualKey removes virtual key id.
func (s *Store) DeleteVirtualKey(ctx context.Context, id string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.remove(ctx, kindVirtualKeys, id)
}

// CreateConfig stores r, whose slug must be free in its workspace, with
// its first version.
func (s *Store) CreateConfig(ctx context.Context, r *Config, body json.RawMessage) error {
	now := s.now()
	r.ID, r.CreatedAt, r.UpdatedAt = NewID(), now, now
	if r.Status == "" {
		r.Status = StatusActive
	}
	r.Versions = []ConfigVersion{{VersionID: NewID(), Config: body, CreatedAt: now}}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, taken := s.ConfigRecord(r.WorkspaceID, r.Slug); taken {
		return ErrConflict
	}
	return s.write(ctx, kindConfigs, r.ID, r)
}

// UpdateConfig applies fn to stored config id; a non-nil body becomes a
// new version (the oldest are dropped beyond MaxConfigVersions).
func (s *Store) UpdateConfig(ctx context.Context, id string, body json.RawMessage, fn func(*Config) error) (*Config, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	r := new(Config)
	if err := s.loadRecord(ctx, kindConfigs, id, r); err != nil {
		return nil, err
	}
	if err := fn(r); err != nil {
		return nil, err
	}
	now := s.now()
	if body != nil {
		r.Versions = append(r.Versions, ConfigVersion{VersionID: NewID(), Config: body, CreatedAt: now})
		if n := len(r.Versions) - MaxConfigVersions; n > 0 {
			r.Versions = r.Versions[n:]
		}
	}
	r.UpdatedAt = now
	return r, s.write(ctx, kindConfigs, r.ID, r)
}

// DeleteConfig removes config id.
func (s *Store) DeleteConfig(ctx context.Context, id string) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.remove(ctx, kindConfigs, id)
}
