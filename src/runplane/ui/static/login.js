// The link `runplane ui` prints carries its token after "#", which never reaches the server or
// its logs: put it in the Token field and take it out of the address. The user still presses
// "Log in", so a link from another site cannot log anyone in as somebody else.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var match = /^#token=(.+)$/.exec(window.location.hash);
  if (!match) { return; }
  history.replaceState(null, "", window.location.pathname + window.location.search);
  var field = document.getElementById("token");
  if (!field) { return; }
  field.value = decodeURIComponent(match[1]);
  var button = document.querySelector("section.login button[type=submit]");
  if (button) { button.focus(); }
});
