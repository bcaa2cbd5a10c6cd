// Package logfilter masks, in Caddy's logs, every header that can carry a
// credential the gateway reads, under both the x-gateway-* and x-portkey-*
// prefixes.
//
// Caddy records the request for its access log before any handler runs and
// hides only Authorization, Proxy-Authorization and Cookie, so the gateway
// itself cannot scrub the other credential headers there. Two modules do,
// with one masking implementation:
//
// The log encoder `llm_secrets` (caddy.logging.encoders.llm_secrets, see
// Encoder) wraps another encoder and masks every header object of every
// entry, at any depth: the access log's request>headers and resp_headers,
// and reverse_proxy DEBUG lines' request>headers and headers. It costs
// nothing per scalar field, so it is the one to use:
//
//	log {
//		format llm_secrets {
//			wrap json
//		}
//	}
//
// The log field filter `llm_secrets` (caddy.logging.encoders.filter.llm_secrets,
// see Secrets) does the same for one field of Caddy's `format filter`
// encoder, for logs that already filter other fields:
//
//	log {
//		format filter {
//			wrap json
//			fields {
//				request>headers llm_secrets
//			}
//		}
//	}
package logfilter
