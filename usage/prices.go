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
	// OpenAI, standard tier. Not verified: no stored copy of the page
	// (neither openai.com/api/pricing nor platform.openai.com/docs/pricing
	// nor developers.openai.com/api/docs/pricing is in the stored material),
	// so these rows keep the numbers and dates they were written with.
	// openai/gpt-5 is also the longest prefix of gpt-5.1, gpt-5.2 and later
	// 5.x names, and openai/o3 of o3-mini and o3-pro, which are priced
	// differently; add config rows for those until the page can be read.
	{Model: "openai/gpt-5", Input: 1.25, Cached: 0.125, Output: 10, Date: "2025-08-07", Source: "https://openai.com/api/pricing/"},        // not verified: no stored copy of the page
	{Model: "openai/gpt-5-mini", Input: 0.25, Cached: 0.025, Output: 2, Date: "2025-08-07", Source: "https://openai.com/api/pricing/"},    // not verified: no stored copy of the page
	{Model: "openai/gpt-5-nano", Input: 0.05, Cached: 0.005, Output: 0.4, Date: "2025-08-07", Source: "https://openai.com/api/pricing/"},  // not verified: no stored copy of the page
	{Model: "openai/gpt-4.1", Input: 2, Cached: 0.5, Output: 8, Date: "2025-04-14", Source: "https://openai.com/api/pricing/"},            // not verified: no stored copy of the page
	{Model: "openai/gpt-4.1-mini", Input: 0.4, Cached: 0.1, Output: 1.6, Date: "2025-04-14", Source: "https://openai.com/api/pricing/"},   // not verified: no stored copy of the page
	{Model: "openai/gpt-4.1-nano", Input: 0.1, Cached: 0.025, Output: 0.4, Date: "2025-04-14", Source: "https://openai.com/api/pricing/"}, // not verified: no stored copy of the page
	{Model: "openai/gpt-4o", Input: 2.5, Cached: 1.25, Output: 10, Date: "2024-10-01", Source: "https://openai.com/api/pricing/"},         // not verified: no stored copy of the page
	{Model: "openai/gpt-4o-mini", Input: 0.15, Cached: 0.075, Output: 0.6, Date: "2024-10-01", Source: "https://openai.com/api/pricing/"}, // not verified: no stored copy of the page
	{Model: "openai/o3", Input: 2, Cached: 0.5, Output: 8, Date: "2025-06-10", Source: "https://openai.com/api/pricing/"},                 // not verified: no stored copy of the page
	{Model: "openai/o4-mini", Input: 1.1, Cached: 0.275, Output: 4.4, Date: "2025-04-16", Source: "https://openai.com/api/pricing/"},      // not verified: no stored copy of the page

	// Anthropic, "Cache hits and refreshes" column for Cached. The Opus rows
	// are read off the model pricing table of the current pricing page;
	// Sonnet 4 and Haiku 3.5 off the older docs.anthropic.com copy of the same
	// page (the current copy's excerpt stops before them); Haiku 4.5 off its
	// model page. Opus 4.6 to 4.8 have rows of their own because
	// claude-opus-4 (the $15 tier of Opus 4 and 4.1) is otherwise their
	// longest prefix. Sonnet 4.5 and 4.6 are listed at Sonnet 4's $3 / $15
	// on their model pages, so claude-sonnet-4 prices them rightly and they
	// need no row.
	{Model: "anthropic/claude-opus-4-8", Input: 5, Cached: 0.5, Output: 25, Date: "2026-11-25", Source: "https://platform.claude.com/docs/en/about-claude/pricing"},
	{Model: "anthropic/claude-opus-4-7", Input: 5, Cached: 0.5, Output: 25, Date: "2026-11-25", Source: "https://platform.claude.com/docs/en/about-claude/pricing"},
	{Model: "anthropic/claude-opus-4-6", Input: 5, Cached: 0.5, Output: 25, Date: "2026-11-25", Source: "https://platform.claude.com/docs/en/about-claude/pricing"},
	{Model: "anthropic/claude-opus-4-5", Input: 5, Cached: 0.5, Output: 25, Date: "2026-11-25", Source: "https://platform.claude.com/docs/en/about-claude/pricing"},
	{Model: "anthropic/claude-opus-4", Input: 15, Cached: 1.5, Output: 75, Date: "2026-11-25", Source: "https://platform.claude.com/docs/en/about-claude/pricing"},
	{Model: "anthropic/claude-sonnet-4", Input: 3, Cached: 0.3, Output: 15, Date: "2026-11-25", Source: "https://docs.anthropic.com/en/docs/about-claude/pricing"},
	// Input and output verified on the model page; its stored copy does not
	// show the cache-hit rate, so Cached (0.1x input) is not verified.
	{Model: "anthropic/claude-haiku-4-5", Input: 1, Cached: 0.1, Output: 5, Date: "2026-11-25", Source: "https://platform.claude.com/docs/pt-BR/models/haiku-4-5/overview"},
	{Model: "anthropic/claude-3-5-haiku", Input: 0.8, Cached: 0.08, Output: 4, Date: "2026-11-25", Source: "https://docs.anthropic.com/en/docs/about-claude/pricing"},

	// Google, paid tier, prompts up to 200k tokens. Not verified: no stored
	// copy of the page (ai.google.dev/gemini-api/docs/pricing is not in the
	// stored material), so these rows keep the numbers and dates they were
	// written with.
	{Model: "gemini/gemini-2.5-pro", Input: 1.25, Cached: 0.125, Output: 10, Date: "2025-06-17", Source: "https://ai.google.dev/gemini-api/docs/pricing"},       // not verified: no stored copy of the page
	{Model: "gemini/gemini-2.5-flash", Input: 0.3, Cached: 0.03, Output: 2.5, Date: "2025-06-17", Source: "https://ai.google.dev/gemini-api/docs/pricing"},      // not verified: no stored copy of the page
	{Model: "gemini/gemini-2.5-flash-lite", Input: 0.1, Cached: 0.01, Output: 0.4, Date: "2025-07-22", Source: "https://ai.google.dev/gemini-api/docs/pricing"}, // not verified: no stored copy of the page
	{Model: "gemini/gemini-2.0-flash", Input: 0.1, Cached: 0.025, Output: 0.4, Date: "2025-02-05", Source: "https://ai.google.dev/gemini-api/docs/pricing"},     // not verified: no stored copy of the page
}
