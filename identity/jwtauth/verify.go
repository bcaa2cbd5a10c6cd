package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/internal/jsonlimit"
)

// Token bounds.
const (
	// MaxTokenBytes bounds a presented token: larger ones are refused
	// before any parsing (an IdP's access token with many groups is a few
	// KiB).
	MaxTokenBytes = 16 << 10
	// DefaultClockSkew is how far exp, nbf and iat may be off.
	DefaultClockSkew = 30 * time.Second
	// MaxClockSkew bounds clock_skew.
	MaxClockSkew = 5 * time.Minute
	// maxSubject bounds the sub claim (it names the user in the ledger).
	maxSubject = 255
)

// defaultAlgorithms are the asymmetric algorithms accepted unless the
// configuration narrows them. "none" and the HMAC algorithms (HS*) are
// never accepted: a gateway that took HS256 would check the signature
// against a public key anyone can read (alg confusion).
var defaultAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// Reason is why a token was refused: the 401's code and message.
type Reason struct {
	Code, Message string
	// UserID is set when the token verified but the claims mapping
	// refused its user (CodeForbidden): that user's caller KeyID.
	UserID string
}

func (r *Reason) Error() string { return r.Message }

func refuse(code, format string, args ...any) *Reason {
	return &Reason{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Token codes, each a 401 in the API's envelope.
const (
	CodeInvalidToken = "invalid_token"
	CodeExpired      = "token_expired"
	CodeAudience     = "token_audience"
	CodeIssuer       = "token_issuer"
	CodeForbidden    = "token_not_allowed"
)

// verifier checks a token's signature and its registered claims.
type verifier struct {
	issuer    string
	audiences []string
	algs      []jose.SignatureAlgorithm
	skew      time.Duration
	keys      *KeySet
	now       func() time.Time
}

// registered are the claims every token is checked for.
type registered struct {
	Issuer    string          `json:"iss"`
	Subject   string          `json:"sub"`
	Audience  json.RawMessage `json:"aud"`
	Expiry    *json.Number    `json:"exp"`
	NotBefore *json.Number    `json:"nbf"`
	IssuedAt  *json.Number    `json:"iat"`
}

// verify returns the claims of a valid token, or a *Reason.
func (v *verifier) verify(ctx context.Context, token string) (map[string]json.RawMessage, *registered, time.Time, error) {
	if len(token) > MaxTokenBytes {
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token is larger than %d bytes", MaxTokenBytes)
	}
	if strings.Count(token, ".") != 2 {
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token is not a JWT (three base64url parts)")
	}
	jws, err := jose.ParseSigned(token, v.algs)
	if err != nil {
		if strings.Contains(err.Error(), "unexpected signature algorithm") {
			return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token's signing algorithm is not allowed")
		}
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token is malformed")
	}
	payload, err := v.keys.verify(ctx, jws)
	if err != nil {
		if errors.Is(err, errUnknownKey) {
			return nil, nil, time.Time{}, refuse(CodeInvalidToken, "%v", err)
		}
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token's signature does not verify")
	}
	// Claims decide who the caller is: read strictly (no member twice,
	// under any case).
	if jsonlimit.Object(payload) != nil || jsonlimit.CheckFold(payload) != nil {
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token's claims are not one JSON object naming each claim once")
	}
	var all map[string]json.RawMessage
	var reg registered
	if json.Unmarshal(payload, &all) != nil || json.Unmarshal(payload, &reg) != nil {
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token's registered claims have the wrong types")
	}
	if reg.Issuer != v.issuer {
		return nil, nil, time.Time{}, refuse(CodeIssuer, "the token was issued by another issuer")
	}
	if !v.audienceOK(reg.Audience) {
		return nil, nil, time.Time{}, refuse(CodeAudience, "the token is not for this gateway (audience)")
	}
	if reg.Subject == "" || len(reg.Subject) > maxSubject {
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token has no sub claim of at most %d bytes", maxSubject)
	}
	now := v.now()
	exp, ok := unix(reg.Expiry)
	if !ok {
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token has no exp claim")
	}
	if !now.Before(exp.Add(v.skew)) {
		return nil, nil, time.Time{}, refuse(CodeExpired, "the token has expired")
	}
	if nbf, ok := unix(reg.NotBefore); ok && now.Add(v.skew).Before(nbf) {
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token is not valid yet (nbf)")
	} else if reg.NotBefore != nil && !ok {
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token's nbf claim is not a time")
	}
	if iat, ok := unix(reg.IssuedAt); ok && now.Add(v.skew).Before(iat) {
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token was issued in the future (iat)")
	} else if reg.IssuedAt != nil && !ok {
		return nil, nil, time.Time{}, refuse(CodeInvalidToken, "the token's iat claim is not a time")
	}
	return all, &reg, exp.Add(v.skew), nil
}

// audienceOK reports whether aud (a string or an array of strings) names
// one of the configured audiences.
func (v *verifier) audienceOK(aud json.RawMessage) bool {
	var one string
	if json.Unmarshal(aud, &one) == nil {
		return slices.Contains(v.audiences, one)
	}
	var many []string
	if json.Unmarshal(aud, &many) != nil {
		return false
	}
	for _, a := range many {
		if slices.Contains(v.audiences, a) {
			return true
		}
	}
	return false
}

// unix reads a NumericDate (seconds, possibly fractional).
func unix(n *json.Number) (time.Time, bool) {
	if n == nil {
		return time.Time{}, false
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1e11 {
		return time.Time{}, false
	}
	sec := math.Floor(f)
	return time.Unix(int64(sec), int64((f-sec)*1e9)), true
}

// parseAlgorithms reads the configured allow-list.
func parseAlgorithms(names []string) ([]jose.SignatureAlgorithm, error) {
	if len(names) == 0 {
		return defaultAlgorithms, nil
	}
	out := make([]jose.SignatureAlgorithm, 0, len(names))
	for _, n := range names {
		a := jose.SignatureAlgorithm(n)
		if !slices.Contains(defaultAlgorithms, a) {
			return nil, fmt.Errorf("algorithms: %q is not an asymmetric JWS algorithm (none and HS* are never accepted)", n)
		}
		out = append(out, a)
	}
	return out, nil
}
