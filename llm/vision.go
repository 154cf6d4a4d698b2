package llm

import "strings"

// visionPrefixes are model-name prefixes of models that take pictures, by
// vendor documentation; the longest match decides, so an exception (a
// text-only member of a family) is a longer prefix set to false.
var visionPrefixes = map[string]bool{
	// OpenAI
	"gpt-4o": true, "gpt-4.1": true, "gpt-4-turbo": true, "gpt-4-vision": true, "gpt-5": true,
	"o1": true, "o1-mini": false, "o1-preview": false, "o3": true, "o3-mini": false, "o4-mini": true,
	"gpt-3.5": false, "gpt-4": false, "chatgpt-4o": true,
	// Anthropic: every Claude 3 and later model.
	"claude-3": true, "claude-sonnet-4": true, "claude-opus-4": true, "claude-haiku-4": true,
	"claude-4": true, "claude-2": false, "claude-instant": false,
	// Google: every Gemini model.
	"gemini-": true,
	// Open-weight models served by compatible servers.
	"llava": true, "bakllava": true, "qwen2.5-vl": true, "qwen2-vl": true, "qwen-vl": true, "qwen3-vl": true,
	"gemma3": true, "gemma-3": true, "llama3.2-vision": true, "llama-3.2-vision": true, "llama4": true, "llama-4": true,
	"pixtral": true, "mistral-small3.1": true, "mistral-small-3.1": true, "minicpm-v": true, "moondream": true,
	"deepseek": false, "llama3": false, "llama-3": false, "mistral": false, "qwen": false,
}

// Vision reports whether the named model takes pictures, by the table
// above; known is false for a name it does not know (then false: a note
// instead of pictures is safe; config's [media] vision overrides). A
// provider prefix ("openai/gpt-4o", "models/gemini-2.5-pro") is ignored.
func Vision(model string) (vision, known bool) {
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	best := -1
	for p, v := range visionPrefixes {
		if strings.HasPrefix(name, p) && len(p) > best {
			best, vision = len(p), v
		}
	}
	return vision, best >= 0
}
