package main

import (
	"conch"
	"conch/tool"
)

// sendLimits are the largest files send_file hands each channel: what the
// service takes from a bot (Telegram's Bot API 50 MB, Discord 10 MB for
// servers without boosts), what homeservers take by default (Dendrite's
// max_file_size_bytes is 10 MB, Synapse's 50 MB: the smaller), what mail
// servers commonly take once base64 grows it by a third (email: the
// configured [email] max_attachment_bytes, at most 15 MB), and what a
// browser page shows well (web).
func sendLimits(d *deps) func(conch.ChannelName) int64 {
	email := int64(15 << 20)
	if n := d.cfg.Email.MaxAttachmentBytes; n > 0 && n < email {
		email = n
	}
	limits := map[conch.ChannelName]int64{
		conch.ChannelTelegram: 50 << 20,
		conch.ChannelDiscord:  10 << 20,
		conch.ChannelSlack:    100 << 20,
		conch.ChannelMatrix:   10 << 20,
		conch.ChannelEmail:    email,
		conch.ChannelWeb:      25 << 20,
		conch.ChannelCLI:      tool.DefaultSendLimit,
	}
	return func(ch conch.ChannelName) int64 { return limits[ch] }
}

// sendFileTool is send_file over the spool.
func sendFileTool(d *deps) (conch.Tool, error) {
	return tool.NewSendFile(tool.SendFileOptions{Store: d.spool, Limit: sendLimits(d), Auditor: d.audit})
}
