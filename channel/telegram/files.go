package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"conch"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

const (
	// maxPhotoBytes is the Bot API's limit on a photo; larger pictures go
	// as documents (uncompressed, as sent).
	maxPhotoBytes = 10 << 20
	// maxAlbum is how many photos one media group holds.
	maxAlbum = 10
)

// isPhoto reports whether Telegram shows a file as a photo: JPEG or PNG
// within the photo limit. Other pictures (GIF, WebP, SVG) go as documents,
// which keeps them as they are.
func isPhoto(a conch.Attachment) bool {
	return (a.MediaType == "image/jpeg" || a.MediaType == "image/png") && a.Size > 0 && a.Size <= maxPhotoBytes
}

// SendAttachments implements conch.AttachmentChannel: the text (if any),
// then the pictures as photos (several as albums of up to ten), then the
// other files as documents.
func (c *Channel) SendAttachments(ctx context.Context, out conch.Outbound) error {
	chat, err := chatOf(out.Key)
	if err != nil {
		return err
	}
	if out.Text != "" {
		if err := c.Send(ctx, out); err != nil {
			return err
		}
	}
	var photos, docs []conch.Attachment
	for _, a := range out.Attachments {
		if a.Open == nil {
			return fmt.Errorf("telegram send file %q: nothing to read", a.Name)
		}
		if a.Size > maxUploadBytes {
			return conch.Errorf(conch.KindInvalid, "telegram send file %q: %s is over Telegram's 50 MB limit for bots", a.Name, size(a.Size))
		}
		if isPhoto(a) {
			photos = append(photos, a)
		} else {
			docs = append(docs, a)
		}
	}
	for start := 0; start < len(photos); start += maxAlbum {
		batch := photos[start:min(start+maxAlbum, len(photos))]
		if len(batch) == 1 {
			err = c.sendPhoto(ctx, chat, out, batch[0])
		} else {
			err = c.sendAlbum(ctx, chat, out, batch)
		}
		if err != nil {
			return err
		}
	}
	for _, a := range docs {
		if err := c.sendDocument(ctx, chat, out, a); err != nil {
			return err
		}
	}
	return nil
}

func (c *Channel) sendPhoto(ctx context.Context, chat int64, out conch.Outbound, a conch.Attachment) error {
	c.uploadAction(ctx, chat, models.ChatActionUploadPhoto)
	name := conch.SafeName(a.Name, "photo")
	return c.upload(ctx, "sendPhoto", a.Name, chat, func(ctx context.Context) error {
		rc, err := a.Open(ctx)
		if err != nil {
			return errPermanentOpen{err}
		}
		defer rc.Close()
		_, err = c.bot.SendPhoto(ctx, &bot.SendPhotoParams{
			ChatID: chat, MessageThreadID: c.topicFor(chat, out.InReplyTo), Photo: &models.InputFileUpload{Filename: name, Data: &reader{rc}},
			DisableNotification: out.Kind != conch.OutboundReply, ReplyParameters: c.replyTo(chat, out),
		})
		return err
	})
}

// sendAlbum sends 2 to 10 photos as one media group.
func (c *Channel) sendAlbum(ctx context.Context, chat int64, out conch.Outbound, as []conch.Attachment) error {
	c.uploadAction(ctx, chat, models.ChatActionUploadPhoto)
	return c.upload(ctx, "sendMediaGroup", fmt.Sprintf("%d photos", len(as)), chat, func(ctx context.Context) error {
		media := make([]models.InputMedia, 0, len(as))
		for i, a := range as {
			rc, err := a.Open(ctx)
			if err != nil {
				return errPermanentOpen{err}
			}
			defer rc.Close()
			media = append(media, &models.InputMediaPhoto{Media: "attach://photo" + strconv.Itoa(i), MediaAttachment: &reader{rc}})
		}
		_, err := c.bot.SendMediaGroup(ctx, &bot.SendMediaGroupParams{
			ChatID: chat, MessageThreadID: c.topicFor(chat, out.InReplyTo), Media: media,
			DisableNotification: out.Kind != conch.OutboundReply, ReplyParameters: c.replyTo(chat, out),
		})
		return err
	})
}

func (c *Channel) sendDocument(ctx context.Context, chat int64, out conch.Outbound, a conch.Attachment) error {
	c.uploadAction(ctx, chat, models.ChatActionUploadDocument)
	name := conch.SafeName(a.Name, "file")
	return c.upload(ctx, "sendDocument", a.Name, chat, func(ctx context.Context) error {
		rc, err := a.Open(ctx)
		if err != nil {
			return errPermanentOpen{err}
		}
		defer rc.Close()
		_, err = c.bot.SendDocument(ctx, &bot.SendDocumentParams{
			ChatID: chat, MessageThreadID: c.topicFor(chat, out.InReplyTo), Document: &models.InputFileUpload{Filename: name, Data: &reader{rc}},
			DisableNotification: out.Kind != conch.OutboundReply, ReplyParameters: c.replyTo(chat, out),
		})
		return err
	})
}

func (c *Channel) uploadAction(ctx context.Context, chat int64, action models.ChatAction) {
	if err := c.chatAction(ctx, chat, action); err != nil {
		c.log.Debug("telegram: upload action", "chat", chat, "err", err)
	}
}

// upload runs one upload call with the channel's retries; a file that
// cannot be read is not retried.
func (c *Channel) upload(ctx context.Context, method, what string, chat int64, fn func(ctx context.Context) error) error {
	err := c.call(ctx, method, sendRetries, fn)
	var po errPermanentOpen
	if errors.As(err, &po) {
		return fmt.Errorf("telegram send file %q: open: %w", what, po.err)
	}
	c.noteSend(err)
	if err != nil {
		return fmt.Errorf("telegram %s %q to %d: %w", method, what, chat, err)
	}
	return nil
}

var _ io.Reader = (*reader)(nil)
