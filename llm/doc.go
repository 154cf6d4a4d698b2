// Package llm is the home of conch's model providers, one package per SDK:
//
//   - llm/openai: OpenAI Chat Completions and every compatible server
//     (Ollama, vLLM, OpenRouter, Groq) through github.com/openai/openai-go/v3;
//   - llm/anthropic: Anthropic Messages through github.com/anthropics/anthropic-sdk-go/v2;
//   - llm/gemini: the Gemini API through google.golang.org/genai.
//
// Each implements conch.Model: it translates a conch.ModelRequest to one SDK
// call, with the SDK's own retries switched off (the agent loop owns
// retries), and reports every failure as a *conch.ModelError classified as
// transient, auth, context-too-long or bad request, with the server's
// Retry-After. A cancelled context comes back as an error wrapping ctx.Err().
//
// Tests run the real SDK clients against internal/testenv/fakellm, a
// wire-exact fake of the three APIs, through one contract suite
// (llm/internal/llmtest).
package llm
