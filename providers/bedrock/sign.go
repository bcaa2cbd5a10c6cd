package bedrock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// Sign adds SigV4 headers (Authorization, X-Amz-Date and, with a session
// token, X-Amz-Security-Token) to u for the clouda credentials in s. The
// signature covers the method, the escaped path, the query, the host, the
// headers already in u.Header (Content-Type, Accept), Content-Length and
// the SHA-256 of the exact body, so nothing of these may change after
// signing; headers a proxy adds later (Via) are simply not signed.
func (p *Provider) Sign(u *providers.Upstream, s *providers.Settings, region string) error {
	req := &http.Request{
		Method:        u.Method,
		URL:           u.URL,
		Host:          u.URL.Host,
		Header:        u.Header,
		ContentLength: int64(len(u.Body)),
	}
	sum := sha256.Sum256(u.Body)
	creds := aws.Credentials{
		AccessKeyID:     s.CloudAAccessKeyID,
		SecretAccessKey: s.CloudASecretAccessKey,
		SessionToken:    s.CloudASessionToken,
	}
	// A fresh signer per request, never a shared one: the SDK signer
	// caches one derived key per region and service and reuses it for any
	// request with the same access key id, without comparing the secret.
	// Shared between tenants, a request naming someone else's access key
	// id with any secret would be signed with their key (and a wrong
	// secret would poison the cache for the owner). Deriving the key is
	// four HMACs.
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), signingService, region, p.now()); err != nil {
		// The signer fails only on malformed input; never echo secrets.
		return apierror.New(http.StatusInternalServerError, apierror.TypeServer, "could not sign the Bedrock request")
	}
	return nil
}
