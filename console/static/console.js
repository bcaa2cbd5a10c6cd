// The console's only script: small conveniences. Every page works
// without it (forms post to the server).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // A form with data-confirm asks before it posts (revoke).
  document.querySelectorAll("form[data-confirm]").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      if (!window.confirm(f.getAttribute("data-confirm"))) {
        e.preventDefault();
      }
    });
  });
  // A select with data-autosubmit sends its form when changed.
  document.querySelectorAll("select[data-autosubmit]").forEach(function (s) {
    s.addEventListener("change", function () { s.form.submit(); });
  });
  // A button with data-copy copies the text of the element it names.
  document.querySelectorAll("button[data-copy]").forEach(function (b) {
    b.addEventListener("click", function () {
      var el = document.getElementById(b.getAttribute("data-copy"));
      if (el && navigator.clipboard) {
        navigator.clipboard.writeText(el.textContent).then(function () { b.textContent = "Copied"; }, function () {});
      }
    });
  });
});
