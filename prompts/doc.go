// Package prompts is the gateway's prompt library: versioned chat prompt
// templates, loaded from files declared in the llm app or managed through
// the API, rendered with Mustache into chat-completion request bodies. It
// has no Caddy or HTTP dependency besides the error envelope (apierror);
// the llm app builds the Registry at provision (app/prompts.go) and
// package prompts/promptapi serves the management and render API.
//
// # Records
//
// A Prompt has a UUID id, a slug (unique among the prompts a workspace
// sees), a name, an optional collection_id (stored, used to filter lists),
// the owning workspace, its versions numbered from 1, and the published
// version number (0: none). A Version holds the template (chat messages
// whose contents are Mustache), the model, the Target (how to reach the
// provider: a virtual key name, a saved config id, or a provider slug with
// non-secret provider settings; or nothing, and the caller's headers
// decide), saved hyperparameters (any chat-completion request field:
// temperature, max_tokens, tools, tool_choice, functions,
// response_format, thinking, …), a description, template_metadata, a label
// id and its creation time. A version's template, model, target and
// hyperparameters never change once created; a new version is added
// instead.
//
// # Prompt files
//
// `llm { prompts <dir> }` loads every *.json file of dir as one prompt at
// each config load (so a Caddy reload picks up edits; an invalid file
// fails the load with an error naming the file and the field):
//
//	{
//	  "name": "Support reply",          // required
//	  "slug": "support-reply",          // default: the name, slugified
//	  "id": "<uuid>",                   // default: derived from the slug
//	  "collection_id": "support",       // optional
//	  "workspace_id": "<uuid>",         // optional: only that workspace sees it
//	  "published": 1,                   // the published version; absent: none
//	  "versions": [                     // version n is the n-th entry
//	    {
//	      "messages": [{"role": "system", "content": "You help {{customer.name}}."}],
//	      "model": "gpt-4o-mini",
//	      "virtual_key": "openai-prod", // or "config_id", or "provider" (+ "provider_settings")
//	      "hyperparameters": {"temperature": 0.2, "max_tokens": 300},
//	      "description": "…", "template_metadata": {…}, "label_id": "…",
//	      "created_at": "2026-01-01T00:00:00Z"  // default: the file's mtime
//	    }
//	  ]
//	}
//
// Unknown fields are errors (a misspelt "temprature" is not silently
// dropped). provider_settings may hold only where-to-reach fields
// (custom_host, api_version, cloud regions, …), never credentials. File
// prompts are visible to every workspace unless they name one, are listed
// and rendered like any other, and are read-only through the API: a write
// is a 409 naming the file, because the file is the source of truth and
// an API edit would be lost at the next reload. Ids are derived from the
// slug (and version ids from the prompt id and number), so they are the
// same on every instance and across reloads. When a file prompt and an
// API prompt of a workspace share a slug, the slug names the file prompt
// (the API prompt stays reachable by id); creating a prompt never takes a
// slug a file already uses.
//
// # Storage
//
// Prompts created through the API live in Redis when the llm app has one
// (RedisStore, one hash, optimistic transactions), else in Caddy's storage
// (StorageStore, one JSON record per prompt, writes under the storage's
// lock, so several instances sharing a storage module stay consistent).
// Reads are served from an in-process snapshot reloaded at most every 5
// seconds (Options.CacheTTL); an instance's own writes are visible at once.
//
// # Rendering
//
// Templates are Mustache, logic-less on purpose (template injection is how
// gateways with richer template engines were compromised): variables,
// dotted names, sections, inverted sections, comments and delimiter
// changes. Partials are refused when a template is parsed: the library's
// default partial loader reads files from the working directory. Nothing
// is HTML-escaped: a prompt is text for a model, and "<b>&" reaches it as
// written. Numbers render as written in the request ("3", not "3.0").
//
// Missing variables are exact, not conservative: a variable outside any
// section must be given (dotted names all the way down), a section or
// inverted section name may be missing (missing is false: that is what
// optional blocks are for), and inside the branch that will render, each
// variable must resolve against the section's item or an enclosing
// context, for every item of a list. A null counts as given and renders
// empty. Extra variables are ignored.
//
// # For the inference pipeline
//
// POST /v1/prompts/{promptId}/completions and prompt_id in a configuration
// object are served by the pipeline with three calls:
//
//	p, v, err := prompts.Resolve(ctx, app.PromptRegistry(), identity.WorkspaceID, promptID)
//	body, err := prompts.RenderRequest(p, v, requestBody)
//	// then plan from v.Target: v.VirtualKey (a virtual key name),
//	// v.ConfigID (a saved config id), or v.Target.ConfigObject() (a
//	// configuration object {"provider":…, settings…} or {"virtual_key":…}),
//	// or none of them (v.Target.IsZero()): the request's own headers.
//
// Resolve applies the suffix rules (bare: published, @latest, @<n>) and
// answers from the snapshot; RenderRequest validates the body (variables
// required; top-level hyperparameters override saved ones; nulls are
// ignored; a nested hyperparameters object or messages are rejected;
// prompt_id is tolerated) and returns the chat-completion body, with
// stream only when the request (or the version) gives it. Both return
// *apierror.Error errors with the right status: 400 bad suffix or body or
// missing variable (param "variables.<name>"), 404 unknown prompt or
// version, or an unpublished prompt called bare (code
// prompt_not_published), 503 when the store cannot be read.
package prompts
