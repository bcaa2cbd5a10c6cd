package bedrock

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/caddy-llm-gateway/caddy-llm-gateway/apierror"
	"github.com/caddy-llm-gateway/caddy-llm-gateway/providers"
)

// The S3 side of batch inference: the job's input is stored and its
// output read with the AWS SDK's S3 client, signed with the target's
// clouda credentials, every call through env.HTTP (the route's
// transports and egress policy). clouda_batch_s3_endpoint points it at
// an S3-compatible store or a VPC endpoint, with path-style addresses.

// s3Client is an S3 client for env's target.
func s3Client(env *providers.BatchEnv) (*s3.Client, error) {
	s := env.Settings
	region, err := regionOf(s)
	if err != nil {
		return nil, err
	}
	creds := aws.Credentials{AccessKeyID: s.CloudAAccessKeyID, SecretAccessKey: s.CloudASecretAccessKey, SessionToken: s.CloudASessionToken}
	o := s3.Options{
		Region: region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return creds, nil
		}),
		HTTPClient: env.HTTP,
		// Checksums only where S3 requires them: an S3-compatible store
		// may not know the SDK's default trailing checksums.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if ep := s.CloudABatchS3Endpoint; ep != "" {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, apierror.BadRequest("clouda_batch_s3_endpoint", "clouda_batch_s3_endpoint must be an http or https URL")
		}
		o.BaseEndpoint, o.UsePathStyle = aws.String(ep), true
	}
	return s3.New(o), nil
}

// putObject stores what write writes as bucket/key, spooled first: the
// signature covers the body's SHA-256.
func (p *Provider) putObject(ctx context.Context, env *providers.BatchEnv, bucket, key string, write func(io.Writer) error) error {
	c, err := s3Client(env)
	if err != nil {
		return err
	}
	f, size, done, err := providers.SpoolBatch(write)
	if err != nil {
		return err
	}
	defer done()
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: f,
		ContentLength: aws.Int64(size), ContentType: aws.String("application/jsonl")})
	return s3Error("storing the batch's input in S3", err)
}

// getObject reads bucket/key.
func (p *Provider) getObject(ctx context.Context, env *providers.BatchEnv, bucket, key string) (io.ReadCloser, error) {
	c, err := s3Client(env)
	if err != nil {
		return nil, err
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, s3Error("reading the batch's results from S3", err)
	}
	return out.Body, nil
}

// s3Error is an S3 refusal as an *apierror.Error with S3's status and
// error code (never the request's credentials); a transport failure is
// returned as it is.
func s3Error(what string, err error) error {
	if err == nil {
		return nil
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) {
		return err
	}
	code := "an error"
	if ae := smithy.APIError(nil); errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	status := re.HTTPStatusCode()
	if status < 400 || status > 599 {
		status = http.StatusBadGateway
	}
	return apierror.Newf(status, apierror.TypeUpstream, "%s: S3 answered %d (%s)", what, re.HTTPStatusCode(), code)
}
