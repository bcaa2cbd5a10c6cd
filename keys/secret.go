package keys

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"strings"
	"sync"
)

// KeyPrefix starts every gateway key the API issues, so a token in an
// Authorization header can be told apart from a provider key without a
// lookup (provider keys start sk-, sk-ant-, AIza…, never gw-).
const KeyPrefix = "gw-"

// keyBodyLen is the number of base62 characters after KeyPrefix: 43
// characters carry 256 bits.
const keyBodyLen = 43

// DisplayLen is how much of a key is kept in clear, for listing and for
// an operator to recognise a key: the prefix and four characters.
const DisplayLen = len(KeyPrefix) + 4

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// IsKey reports whether s has the format of an API-issued gateway key.
// It says nothing about whether the key exists.
func IsKey(s string) bool {
	if len(s) != len(KeyPrefix)+keyBodyLen || !strings.HasPrefix(s, KeyPrefix) {
		return false
	}
	for i := len(KeyPrefix); i < len(s); i++ {
		if strings.IndexByte(base62, s[i]) < 0 {
			return false
		}
	}
	return true
}

// NewKey returns a fresh random gateway key.
func NewKey() string {
	var b [keyBodyLen]byte
	max := big.NewInt(int64(len(base62)))
	for i := range b {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic("keys: crypto/rand failed: " + err.Error())
		}
		b[i] = base62[n.Int64()]
	}
	return KeyPrefix + string(b[:])
}

// Mask returns the displayable form of a key: its first DisplayLen
// characters and asterisks.
func Mask(prefix string) string { return prefix + "****" }

// Digest is the keyed hash a gateway key is stored and looked up by.
type Digest [sha256.Size]byte

// String returns the digest in hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// ParseDigest reads a hex digest.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(d) {
		return d, errors.New("keys: malformed digest")
	}
	copy(d[:], b)
	return d, nil
}

// Hasher computes HMAC-SHA256 digests of keys under the server secret.
// A dump of the store holds only these: without the secret they cannot
// even be checked against a guessed key, and the keys themselves carry
// 256 random bits. Safe for concurrent use; Sum does not allocate for a
// key of up to 128 bytes.
type Hasher struct {
	pool sync.Pool
}

// hashState is one pooled HMAC with buffers for its input and output, so
// neither escapes through the hash.Hash interface on every call.
type hashState struct {
	mac hash.Hash
	in  [128]byte
	out [sha256.Size]byte
}

// NewHasher returns a Hasher over secret (at least 32 bytes).
func NewHasher(secret []byte) (*Hasher, error) {
	if len(secret) < 32 {
		return nil, fmt.Errorf("keys: the server secret must be at least 32 bytes, got %d", len(secret))
	}
	s := append([]byte(nil), secret...)
	h := &Hasher{}
	h.pool.New = func() any { return &hashState{mac: hmac.New(sha256.New, s)} }
	return h, nil
}

// Sum returns the digest of key.
func (h *Hasher) Sum(key string) Digest {
	st := h.pool.Get().(*hashState)
	st.mac.Reset()
	if len(key) <= len(st.in) {
		n := copy(st.in[:], key)
		_, _ = st.mac.Write(st.in[:n])
	} else {
		_, _ = st.mac.Write([]byte(key))
	}
	var d Digest
	copy(d[:], st.mac.Sum(st.out[:0]))
	h.pool.Put(st)
	return d
}

// Sealer encrypts provider credentials at rest with AES-256-GCM. The first
// key seals; every key opens, so an operator rotates the encryption key by
// putting the new one first and keeping the old ones until every record
// was rewritten (see docs/keys.md).
type Sealer struct {
	aeads []cipher.AEAD
	ids   []string
}

// ParseEncryptionKey reads a 32-byte key given as 64 hex digits or as
// standard or URL base64.
func ParseEncryptionKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == 32 {
			return b, nil
		}
	}
	return nil, errors.New("an encryption key must be 32 bytes, given as 64 hex digits or base64")
}

// NewSealer returns a Sealer sealing with keys[0] and opening with any.
func NewSealer(keys ...[]byte) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("keys: no encryption key")
	}
	s := &Sealer{}
	for _, k := range keys {
		if len(k) != 32 {
			return nil, errors.New("keys: an encryption key must be 32 bytes")
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		g, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(append([]byte("llm-gateway key id\x00"), k...))
		s.aeads = append(s.aeads, g)
		s.ids = append(s.ids, hex.EncodeToString(sum[:4]))
	}
	return s, nil
}

// Sealed is an encrypted value and the id of the key that sealed it (a
// hash of the key, not the key).
type Sealed struct {
	KeyID      string `json:"key_id"`
	Ciphertext []byte `json:"ciphertext"`
}

// Seal encrypts plain, bound to aad (the record's id), so a ciphertext
// moved to another record does not open.
func (s *Sealer) Seal(plain, aad []byte) *Sealed {
	g := s.aeads[0]
	nonce := make([]byte, g.NonceSize(), g.NonceSize()+len(plain)+g.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		panic("keys: crypto/rand failed: " + err.Error())
	}
	return &Sealed{KeyID: s.ids[0], Ciphertext: g.Seal(nonce, nonce, plain, aad)}
}

// Open decrypts v. stale reports that it was sealed with an older key.
func (s *Sealer) Open(v *Sealed, aad []byte) (plain []byte, stale bool, err error) {
	for i, id := range s.ids {
		if id != v.KeyID {
			continue
		}
		g := s.aeads[i]
		if len(v.Ciphertext) < g.NonceSize() {
			return nil, false, errors.New("keys: ciphertext too short")
		}
		n := g.NonceSize()
		plain, err := g.Open(nil, v.Ciphertext[:n], v.Ciphertext[n:], aad)
		if err != nil {
			return nil, false, errors.New("keys: ciphertext does not open (wrong key or tampered record)")
		}
		return plain, i > 0, nil
	}
	return nil, false, fmt.Errorf("keys: sealed with encryption key %s, which is not configured", v.KeyID)
}

// replayBox seals a rotation's new key under a key derived from both the
// server secret (h's, which keyed hashes use) and the client's
// Idempotency-Key, bound to the record, so a replay can answer the same
// key while a dump of the store (which keeps only the box and an HMAC of
// the Idempotency-Key) holds nothing usable: opening it takes the server
// secret, and the Idempotency-Key, which only the client has.
func replayBox(h *Hasher, idemKey, recordID string) cipher.AEAD {
	k := h.Sum("llm-gateway rotate replay\x00" + recordID + "\x00" + idemKey)
	block, _ := aes.NewCipher(k[:])
	g, _ := cipher.NewGCM(block)
	return g
}

func sealReplay(h *Hasher, idemKey, recordID, key string) []byte {
	g := replayBox(h, idemKey, recordID)
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic("keys: crypto/rand failed: " + err.Error())
	}
	return g.Seal(nonce, nonce, []byte(key), nil)
}

func openReplay(h *Hasher, idemKey, recordID string, box []byte) (string, bool) {
	g := replayBox(h, idemKey, recordID)
	if len(box) < g.NonceSize() {
		return "", false
	}
	plain, err := g.Open(nil, box[:g.NonceSize()], box[g.NonceSize():], nil)
	return string(plain), err == nil
}
