// The answer to a login link: keep the session's request token in this
// origin's storage (pages of other ports or hosts cannot read it) and go on
// without the login link in the history.
"use strict";
(function () {
  const meta = (n) => document.querySelector('meta[name="' + n + '"]').content;
  localStorage.setItem("conch.token", meta("conch-token"));
  location.replace(meta("conch-next"));
})();
