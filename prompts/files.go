package prompts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// promptFile is the format of one prompt file; see the package doc.
type promptFile struct {
	ID           string        `json:"id"`
	Name         string        `json:"name"`
	Slug         string        `json:"slug"`
	CollectionID string        `json:"collection_id"`
	WorkspaceID  string        `json:"workspace_id"`
	Published    int           `json:"published"`
	Versions     []fileVersion `json:"versions"`
}

type fileVersion struct {
	Description      string                     `json:"description"`
	Messages         []Message                  `json:"messages"`
	Model            string                     `json:"model"`
	VirtualKey       string                     `json:"virtual_key"`
	ConfigID         string                     `json:"config_id"`
	Provider         string                     `json:"provider"`
	ProviderSettings map[string]json.RawMessage `json:"provider_settings"`
	Hyperparameters  map[string]json.RawMessage `json:"hyperparameters"`
	TemplateMetadata json.RawMessage            `json:"template_metadata"`
	LabelID          string                     `json:"label_id"`
	CreatedAt        *time.Time                 `json:"created_at"`
}

// LoadDir reads every *.json file of dir (not its subdirectories) as one
// prompt. Any invalid file fails the whole load with an error naming the
// file and the field, so a bad prompt fails the config load rather than
// the first request that uses it.
func LoadDir(dir string) ([]*Prompt, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("prompts directory: %v", err)
	}
	var out []*Prompt
	for _, e := range entries {
		if e.IsDir() || !strings.EqualFold(filepath.Ext(e.Name()), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		p, err := LoadFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// LoadFile reads one prompt file. Errors start with "prompt file <path>:"
// and name the offending field by its JSON path.
func LoadFile(path string) (*Prompt, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prompt file %s: %v", path, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("prompt file %s: %v", path, err)
	}
	p, err := parseFile(data, filepath.Base(path), info.ModTime())
	if err != nil {
		return nil, fmt.Errorf("prompt file %s: %v", path, err)
	}
	return p, nil
}

// parseFile decodes and validates one prompt file's content; name is the
// file's base name, modTime stands in for missing creation times.
func parseFile(data []byte, name string, modTime time.Time) (*Prompt, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f promptFile
	if err := dec.Decode(&f); err != nil {
		return nil, describeJSONError(data, err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value: a prompt file holds one prompt object")
	}
	if strings.TrimSpace(f.Name) == "" {
		return nil, fieldErr("name", "is required")
	}
	slug := f.Slug
	if slug == "" {
		slug = Slugify(f.Name)
	} else if Slugify(slug) != slug {
		return nil, fieldErr("slug", "%q is not a slug: use lower-case letters, digits and single dashes", slug)
	}
	if slug == "" {
		return nil, fieldErr("slug", "the name %q gives an empty slug; set slug", f.Name)
	}
	modTime = modTime.UTC().Truncate(time.Millisecond)
	p := &Prompt{
		ID: f.ID, Slug: slug, Name: f.Name, CollectionID: f.CollectionID, WorkspaceID: f.WorkspaceID,
		Published: f.Published, CreatedAt: modTime, LastUpdatedAt: modTime, File: name,
	}
	if p.ID == "" {
		p.ID = deriveID("file", slug, f.WorkspaceID)
	}
	for i, fv := range f.Versions {
		v := &Version{
			Number: i + 1, Description: fv.Description, Messages: fv.Messages, Model: fv.Model,
			Target:          Target{VirtualKey: fv.VirtualKey, ConfigID: fv.ConfigID, Provider: fv.Provider, ProviderSettings: fv.ProviderSettings},
			Hyperparameters: fv.Hyperparameters, TemplateMetadata: fv.TemplateMetadata, LabelID: fv.LabelID,
			CreatedAt: modTime,
		}
		v.ID = deriveID(p.ID, fmt.Sprint(v.Number))
		if fv.CreatedAt != nil {
			v.CreatedAt = fv.CreatedAt.UTC()
		}
		p.Versions = append(p.Versions, v)
	}
	if err := p.validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) && fe.Field == "published_version" {
			fe.Field = "published"
		}
		return nil, err
	}
	if i := slices.IndexFunc(p.Versions, func(v *Version) bool { return v.CreatedAt.IsZero() }); i >= 0 {
		return nil, fieldErr(fmt.Sprintf("versions[%d].created_at", i), "is zero")
	}
	return p, nil
}

// describeJSONError makes a decoding error say where: the field for type
// errors, the line and column for syntax errors.
func describeJSONError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset)
		return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return fieldErr(field, "must be %s, got JSON %s", jsonKind(te.Type.Kind().String()), te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("unknown field %s (fields: id, name, slug, collection_id, workspace_id, published, versions; per version: description, messages, model, virtual_key, config_id, provider, provider_settings, hyperparameters, template_metadata, label_id, created_at)",
			strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the file is empty or truncated")
	}
	return err
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64", "float64":
		return "a number"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return goKind
}

func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}
