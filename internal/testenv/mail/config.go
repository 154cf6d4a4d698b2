package mail

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

func (s *Server) path(parts ...string) string {
	return filepath.Join(append([]string{s.Dir}, parts...)...)
}

func (s *Server) writeDovecot(imapPort, lmtpPort int) error {
	for _, d := range []string{"dovecot/run", "dovecot/state", "maildirs"} {
		if err := os.MkdirAll(s.path(d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chown(s.path("maildirs"), s.mailUID, s.mailGID); err != nil {
		return err
	}
	if err := os.WriteFile(s.path("dovecot", "users"), nil, 0o644); err != nil {
		return err
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	conf := fmt.Sprintf(`# conch test mail server (generated)
base_dir = %[1]s/dovecot/run
state_dir = %[1]s/dovecot/state
instance_name = conch-test-%[2]s
log_path = %[1]s/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:%[1]s/maildirs/%%n
mail_uid = %[3]d
mail_gid = %[4]d
first_valid_uid = 1
first_valid_gid = 1
# Tests log in with wrong passwords on purpose: no penalty delays for loopback.
login_trusted_networks = 127.0.0.0/8
auth_failure_delay = 0
mailbox_idle_check_interval = 1 secs
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%n %[1]s/dovecot/users
}
userdb {
  driver = static
  args = uid=%[3]d gid=%[4]d home=%[1]s/maildirs/%%n allow_all_users=yes
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[5]d
  }
  inet_listener imaps {
    port = 0
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = %[6]d
  }
}
protocol lmtp {
  postmaster_address = postmaster@%[7]s
}
`, s.Dir, hex.EncodeToString(id), s.mailUID, s.mailGID, imapPort, lmtpPort, Domain)
	return os.WriteFile(s.path("dovecot", "dovecot.conf"), []byte(conf), 0o644)
}

func (s *Server) writePostfix(lmtpPort, smtpPort int) error {
	pf := s.path("postfix")
	for _, d := range []string{"spool", "data"} {
		if err := os.MkdirAll(filepath.Join(pf, d), 0o755); err != nil {
			return err
		}
	}
	pfUser, _ := user.Lookup("postfix")
	puid, _ := strconv.Atoi(pfUser.Uid)
	if err := os.Chown(filepath.Join(pf, "data"), puid, -1); err != nil {
		return err
	}
	// maillog_file must live under one of maillog_file_prefixes.
	mainCF := fmt.Sprintf(`compatibility_level = 3.6
queue_directory = %[1]s/spool
data_directory = %[1]s/data
command_directory = /usr/sbin
daemon_directory = /usr/lib/postfix/sbin
meta_directory = /etc/postfix
shlib_directory = /usr/lib/postfix
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = mail.%[2]s
mydomain = %[2]s
myorigin = %[2]s
mydestination =
local_recipient_maps =
virtual_mailbox_domains = %[2]s
virtual_transport = lmtp:inet:127.0.0.1:%[3]d
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject
alias_maps =
alias_database =
maillog_file_prefixes = %[1]s
maillog_file = %[1]s/postfix.log
smtputf8_enable = no
biff = no
message_size_limit = 62914560
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
syslog_name = postfix-conch-test
`, pf, Domain, lmtpPort)
	masterCF := fmt.Sprintf(`127.0.0.1:%d inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
`, smtpPort)
	if err := os.WriteFile(filepath.Join(pf, "main.cf"), []byte(mainCF), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pf, "master.cf"), []byte(masterCF), 0o644)
}
