package realtime

import (
	"net/http"
	"strings"
)

// KeyProtocolPrefix starts the subprotocol a browser sends its key in,
// since a browser's WebSocket cannot set headers: OpenAI's form,
//
//	Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.<key>
const KeyProtocolPrefix = "openai-insecure-api-key."

// betaProtocol is the subprotocol beta clients name the beta interface
// with; the provider is told it as the OpenAI-Beta header.
const betaProtocol = "openai-beta.realtime-v1"

// TakeSubprotocolKey moves a gateway key sent as a subprotocol into the
// gateway key header (x-gateway-api-key), unless the request already
// carries one there, and removes it from the offered
// subprotocols in every case: it is a credential, never negotiated,
// forwarded or logged. A beta subprotocol becomes OpenAI-Beta:
// realtime=v1. Every handler that reads the key (llm_ratelimit and
// llm_gateway) calls it first; a second call finds nothing to do.
func TakeSubprotocolKey(h http.Header) {
	vs := h["Sec-Websocket-Protocol"]
	if len(vs) == 0 {
		return
	}
	var key string
	keep := make([]string, 0, 2)
	beta := false
	for _, v := range vs {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			switch {
			case strings.HasPrefix(p, KeyProtocolPrefix):
				key = p[len(KeyProtocolPrefix):]
			case p == betaProtocol:
				beta = true
				keep = append(keep, p)
			case p != "":
				keep = append(keep, p)
			}
		}
	}
	if len(keep) == 0 {
		delete(h, "Sec-Websocket-Protocol")
	} else {
		h["Sec-Websocket-Protocol"] = []string{strings.Join(keep, ", ")}
	}
	if beta && h.Get("Openai-Beta") == "" {
		h.Set("Openai-Beta", "realtime=v1")
	}
	if key == "" || h.Get("X-Gateway-Api-Key") != "" || h.Get("X-Portkey-Api-Key") != "" {
		return
	}
	h.Set("X-Gateway-Api-Key", key)
}

// Subprotocols are the subprotocols the gateway accepts from a client,
// in order of preference.
var Subprotocols = []string{"realtime", betaProtocol}
