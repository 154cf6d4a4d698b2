package usage

// The price table: USD per million tokens, per model. A row's Model is a
// prefix of the model's name (the longest prefix wins, so
// "gpt-4o-mini-2024-07-18" takes gpt-4o-mini, not gpt-4o). Cached is the
// rate of input read from the provider's prompt cache (0: billed as input).
// Each row says where its numbers come from and when they were read there;
// config `[prices."<model>"]` overrides or adds rows. Long-prompt tiers
// (Gemini 2.5 Pro above 200k tokens) and cache writes (Anthropic, 1.25×
// input) are not modelled: they are priced at the base input rate.
var table = []Price{
	// OpenAI, https://openai.com/api/pricing/ (standard tier).
	{Model: "openai/gpt-5", Input: 1.25, Cached: 0.125, Output: 10, Date: "2025-08-07", Source: "https://openai.com/api/pricing/"},
	{Model: "openai/gpt-5-mini", Input: 0.25, Cached: 0.025, Output: 2, Date: "2025-08-07", Source: "https://openai.com/api/pricing/"},
	{Model: "openai/gpt-5-nano", Input: 0.05, Cached: 0.005, Output: 0.4, Date: "2025-08-07", Source: "https://openai.com/api/pricing/"},
	{Model: "openai/gpt-4.1", Input: 2, Cached: 0.5, Output: 8, Date: "2025-04-14", Source: "https://openai.com/api/pricing/"},
	{Model: "openai/gpt-4.1-mini", Input: 0.4, Cached: 0.1, Output: 1.6, Date: "2025-04-14", Source: "https://openai.com/api/pricing/"},
	{Model: "openai/gpt-4.1-nano", Input: 0.1, Cached: 0.025, Output: 0.4, Date: "2025-04-14", Source: "https://openai.com/api/pricing/"},
	{Model: "openai/gpt-4o", Input: 2.5, Cached: 1.25, Output: 10, Date: "2024-10-01", Source: "https://openai.com/api/pricing/"},
	{Model: "openai/gpt-4o-mini", Input: 0.15, Cached: 0.075, Output: 0.6, Date: "2024-10-01", Source: "https://openai.com/api/pricing/"},
	{Model: "openai/o3", Input: 2, Cached: 0.5, Output: 8, Date: "2025-06-10", Source: "https://openai.com/api/pricing/"},
	{Model: "openai/o4-mini", Input: 1.1, Cached: 0.275, Output: 4.4, Date: "2025-04-16", Source: "https://openai.com/api/pricing/"},

	// Anthropic, https://docs.anthropic.com/en/docs/about-claude/pricing (cache hits at 0.1× input).
	{Model: "anthropic/claude-opus-4-5", Input: 5, Cached: 0.5, Output: 25, Date: "2025-11-24", Source: "https://docs.anthropic.com/en/docs/about-claude/pricing"},
	{Model: "anthropic/claude-opus-4", Input: 15, Cached: 1.5, Output: 75, Date: "2025-05-22", Source: "https://docs.anthropic.com/en/docs/about-claude/pricing"},
	{Model: "anthropic/claude-sonnet-4", Input: 3, Cached: 0.3, Output: 15, Date: "2025-05-22", Source: "https://docs.anthropic.com/en/docs/about-claude/pricing"},
	{Model: "anthropic/claude-haiku-4-5", Input: 1, Cached: 0.1, Output: 5, Date: "2025-10-15", Source: "https://docs.anthropic.com/en/docs/about-claude/pricing"},
	{Model: "anthropic/claude-3-5-haiku", Input: 0.8, Cached: 0.08, Output: 4, Date: "2024-11-04", Source: "https://docs.anthropic.com/en/docs/about-claude/pricing"},

	// Google, https://ai.google.dev/gemini-api/docs/pricing (paid tier, prompts up to 200k tokens).
	{Model: "gemini/gemini-2.5-pro", Input: 1.25, Cached: 0.125, Output: 10, Date: "2025-06-17", Source: "https://ai.google.dev/gemini-api/docs/pricing"},
	{Model: "gemini/gemini-2.5-flash", Input: 0.3, Cached: 0.03, Output: 2.5, Date: "2025-06-17", Source: "https://ai.google.dev/gemini-api/docs/pricing"},
	{Model: "gemini/gemini-2.5-flash-lite", Input: 0.1, Cached: 0.01, Output: 0.4, Date: "2025-07-22", Source: "https://ai.google.dev/gemini-api/docs/pricing"},
	{Model: "gemini/gemini-2.0-flash", Input: 0.1, Cached: 0.025, Output: 0.4, Date: "2025-02-05", Source: "https://ai.google.dev/gemini-api/docs/pricing"},
}
