// The dashboard's only script (besides htmx): it tells the server the
// browser's time zone, so times are shown in the reader's zone, and picks
// that zone in the voucher form's select.
(function () {
  "use strict";
  var zone = "";
  try {
    zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
  } catch (e) {
    zone = "";
  }
  if (zone && document.cookie.indexOf("voucherd_tz=" + encodeURIComponent(zone)) < 0) {
    document.cookie = "voucherd_tz=" + encodeURIComponent(zone) + "; path=/admin; max-age=31536000; samesite=lax";
  }
  function pickZone() {
    var select = document.querySelector("select[data-browser-zone]");
    if (!select || !zone) {
      return;
    }
    var found = false;
    for (var i = 0; i < select.options.length; i++) {
      if (select.options[i].value === zone) {
        found = true;
      }
    }
    if (!found) {
      var opt = document.createElement("option");
      opt.value = zone;
      opt.textContent = zone + " (this browser)";
      select.insertBefore(opt, select.firstChild);
    }
    select.value = zone;
    select.dispatchEvent(new Event("change", { bubbles: true }));
  }
  // A field's message from the last submit goes once the field is edited.
  document.addEventListener("input", function (ev) {
    var field = ev.target.closest && ev.target.closest(".field.invalid");
    if (!field) {
      return;
    }
    field.classList.remove("invalid");
    var msg = field.querySelector("p.error");
    if (msg) {
      msg.remove();
    }
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", pickZone);
  } else {
    pickZone();
  }
})();
