package formats

import (
	"encoding/json"
	"fmt"
)

// ---- LangChain ----

// LangChainTool is what a host needs to build a LangChain BaseTool: its name,
// description and args_schema, plus the per-argument Python view.
//
//   - ArgsSchema is the JSON Schema of the arguments after the type mapping: what a
//     Pydantic v2 model built from the mapped arguments would give back from
//     model_json_schema() (one mapped type per property, enum and default kept when
//     they fit it, the source title and boolean additionalProperties kept, $defs
//     dropped). LangChain accepts a JSON Schema dict as args_schema.
//   - Args maps each argument to its Python annotation under the type mapping ("str",
//     "int", "float", "bool"), whether it is required and nullable, and its enum and
//     default. (LangChain's own BaseTool.args property is the "properties" of
//     args_schema; that is ArgsSchema["properties"] here, so Args carries the Python
//     side instead, which is what a host needs to build the model.)
//   - Fallbacks lists the arguments that fell back to str.
type LangChainTool struct {
	Name        string                  `json:"name"`
	Description string                  `json:"description"`
	ArgsSchema  map[string]any          `json:"args_schema"`
	Args        map[string]LangChainArg `json:"args"`
	Fallbacks   []Fallback              `json:"fallbacks"`
}

// LangChainArg is one argument of a LangChainTool.
type LangChainArg struct {
	// Type is the Python type name: "str", "int", "float" or "bool".
	Type        string          `json:"type"`
	Description string          `json:"description,omitempty"`
	Required    bool            `json:"required"`
	Nullable    bool            `json:"nullable,omitempty"`
	Enum        []any           `json:"enum,omitempty"`
	Default     json.RawMessage `json:"default,omitempty"`
}

func renderLangChain(t Tool) (any, error) {
	ma, err := mapToolSchema(t)
	if err != nil {
		return nil, err
	}
	args := map[string]LangChainArg{}
	for _, a := range ma.args {
		la := LangChainArg{
			Type:        pythonTypes[a.jsonType],
			Description: a.describe(true),
			Required:    a.required,
			Nullable:    a.nullable,
			Enum:        a.enum,
		}
		if a.defaultFits() {
			la.Default, _ = json.Marshal(a.def)
		}
		args[a.name] = la
	}
	return LangChainTool{
		Name:        t.Name,
		Description: t.Description,
		ArgsSchema:  ma.objectSchema(),
		Args:        args,
		Fallbacks:   ma.fallbacks("str"),
	}, nil
}

// ---- HuggingFace ----

// HuggingFaceTool is the class attributes of a transformers / smolagents Tool: name,
// description, inputs and output_type.
//
// inputs has no place for enums or defaults, so they are spelled out at the end of the
// description ("One of: …", "Default: …"). An input is nullable when the schema admits
// null or does not require it: in smolagents "nullable" is how an optional input is
// declared (its forward() parameter then needs a default). output_type is "string":
// an MCP tool's result reaches the agent as text content.
type HuggingFaceTool struct {
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Inputs      map[string]HFInput `json:"inputs"`
	OutputType  string             `json:"output_type"`
	Fallbacks   []Fallback         `json:"fallbacks"`
}

// HFInput is one entry of a HuggingFace Tool's inputs. Type is a HuggingFace type name;
// Render only produces the mapped ones ("string", "integer", "number", "boolean").
// smolagents requires the description key, so it is always written.
type HFInput struct {
	Type        string `json:"type"`
	Description string `json:"description"`
	Nullable    bool   `json:"nullable,omitempty"`
}

func renderHuggingFace(t Tool) (any, error) {
	ma, err := mapToolSchema(t)
	if err != nil {
		return nil, err
	}
	inputs := map[string]HFInput{}
	for _, a := range ma.args {
		inputs[a.name] = HFInput{
			Type:        a.jsonType,
			Description: a.describe(false),
			Nullable:    a.nullable || !a.required,
		}
	}
	return HuggingFaceTool{
		Name:        t.Name,
		Description: t.Description,
		Inputs:      inputs,
		OutputType:  "string",
		Fallbacks:   ma.fallbacks("string"),
	}, nil
}

// ---- DSPy ----

// DSPyTool is the fields of a dspy.Tool: name, desc, args and arg_types.
//
// In dspy.Tool, args maps each argument to its JSON Schema (DSPy validates call
// arguments against it with jsonschema, so its "type" must stay a JSON Schema type
// name), and arg_types maps it to a Python type. Args therefore holds the mapped JSON
// Schema of each argument (enum and default included when they fit) and ArgTypes the
// Python name from the type mapping. DSPy has no notion of a required argument apart
// from a default, so required-ness is not rendered.
type DSPyTool struct {
	Name      string                    `json:"name"`
	Desc      string                    `json:"desc"`
	Args      map[string]map[string]any `json:"args"`
	ArgTypes  map[string]string         `json:"arg_types"`
	Fallbacks []Fallback                `json:"fallbacks"`
}

func renderDSPy(t Tool) (any, error) {
	ma, err := mapToolSchema(t)
	if err != nil {
		return nil, err
	}
	args := map[string]map[string]any{}
	types := map[string]string{}
	for _, a := range ma.args {
		args[a.name] = a.jsonSchema()
		types[a.name] = pythonTypes[a.jsonType]
	}
	return DSPyTool{
		Name:      t.Name,
		Desc:      t.Description,
		Args:      args,
		ArgTypes:  types,
		Fallbacks: ma.fallbacks("str"),
	}, nil
}

// ---- OpenHands ----

// OpenHandsActionMCP is the OpenHands action type of a call to an MCP tool
// (ActionType.MCP, dispatched as an MCPAction by the OpenHands runtime).
const OpenHandsActionMCP = "call_tool_mcp"

// OpenHandsTool is an MCP tool as an OpenHands agent sees it, and the action its calls
// become.
//
// OpenHands gives its agent MCP tools as function-calling tools in the OpenAI Chat
// Completions shape (what its MCP client tool's to_param() returns), and turns a call
// into an MCPAction event — serialized {"action":"call_tool_mcp","args":{"name",
// "arguments"}} — that the runtime dispatches. Tool is that function tool, with its
// parameters after the type mapping (lossy like the other Python formats); Action is
// the event template (arguments are filled from the model's call). There is no
// per-tool Action subclass to render: every call becomes the same generic MCPAction,
// and a host that wants a class per tool subclasses it itself.
type OpenHandsTool struct {
	Tool      OpenAITool      `json:"tool"`
	Action    OpenHandsAction `json:"action"`
	Fallbacks []Fallback      `json:"fallbacks"`
}

// OpenHandsAction is the serialized OpenHands event a call of the tool becomes.
type OpenHandsAction struct {
	Action string              `json:"action"`
	Args   OpenHandsActionArgs `json:"args"`
}

// OpenHandsActionArgs are the MCPAction fields.
type OpenHandsActionArgs struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

func renderOpenHands(t Tool) (any, error) {
	ma, err := mapToolSchema(t)
	if err != nil {
		return nil, err
	}
	params, err := json.Marshal(ma.objectSchema())
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return OpenHandsTool{
		Tool: OpenAITool{Type: "function", Function: OpenAIFunction{
			Name: t.Name, Description: t.Description, Parameters: params,
		}},
		Action: OpenHandsAction{
			Action: OpenHandsActionMCP,
			Args:   OpenHandsActionArgs{Name: t.Name, Arguments: map[string]any{}},
		},
		Fallbacks: ma.fallbacks("string"),
	}, nil
}
