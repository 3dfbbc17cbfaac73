package adapter

import (
	"text/template"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// compiledTool is a Tool with everything that can fail checked and prepared once, so
// that a call never re-parses its template or schema.
type compiledTool struct {
	Tool
	schema *jsonschema.Schema
	// fast proves most valid arguments valid without the library's validator.
	fast     *fastSchema
	template *template.Template
	// remote serves a Remote backend; linked by the remote pool, not by compileConfig.
	remote *remote
}

// compileConfig validates cfg and returns its tools ready to serve.
func compileConfig(cfg *Config) ([]*compiledTool, error) {
	checked, err := adapterconfig.Compile(cfg)
	if err != nil {
		return nil, err
	}
	tools := make([]*compiledTool, len(checked))
	for i, c := range checked {
		tools[i] = &compiledTool{
			Tool:     *c.Tool,
			schema:   c.Schema,
			fast:     newFastSchema(c.Schema),
			template: c.Template,
		}
	}
	return tools, nil
}
