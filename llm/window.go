package llm

import "strings"

// DefaultContextWindow is assumed for a model the table does not know (a
// local or new model); config's model.context_window overrides it.
const DefaultContextWindow = 32768

// contextWindows maps model name prefixes to context windows in tokens, the
// longest matching prefix winning. Figures are the providers' published input
// limits; a prefix covers dated and suffixed variants ("gpt-4o-2024-08-06",
// "claude-sonnet-4-5-20250929").
var contextWindows = []struct {
	prefix string
	tokens int
}{
	// OpenAI
	{"gpt-5", 400000},
	{"gpt-4.1", 1047576},
	{"gpt-4o", 128000},
	{"gpt-4-turbo", 128000},
	{"gpt-4", 8192},
	{"gpt-3.5-turbo", 16385},
	{"o1", 200000},
	{"o3", 200000},
	{"o4-mini", 200000},
	// Anthropic
	{"claude-", 200000},
	// Google
	{"gemini-1.5-pro", 2097152},
	{"gemini-", 1048576},
	// Open models commonly served through OpenAI-compatible servers.
	{"llama3.1", 131072},
	{"llama3.2", 131072},
	{"qwen3", 32768},
	{"mistral", 32768},
}

// ContextWindow returns the context window of a model by its name (the
// provider's prefix such as "models/" or "openai/" is ignored) and whether
// the table knows it.
func ContextWindow(model string) (int, bool) {
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	best, n := -1, 0
	for _, w := range contextWindows {
		if strings.HasPrefix(name, w.prefix) && len(w.prefix) > best {
			best, n = len(w.prefix), w.tokens
		}
	}
	if best < 0 {
		return DefaultContextWindow, false
	}
	return n, true
}
