// The dashboard's only script (besides htmx): it tells the server the
// browser's time zone (from the sign-in page on, so the first page after it
// is already in the reader's zone), picks that zone in the voucher form's
// select, moves the focus to the first field at fault after a refused
// submit, echoes what an amount typed in the currency's units means, and
// puts the focus back where it was after a refresh swaps part of a page (in
// place or out of band), and copies a new API key with its Copy button.
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
  // An amount typed in the currency's own units, echoed as understood:
  // "50 = 50.00 USD". The rules are components.ParseAmount's: a space or _
  // between digits groups them, "." is the decimal point, at most the
  // currency's decimals (the server's table, on the currency field: a code
  // not in it has 2), and the minor units are at most 2^53 - 1
  // (voucher.MaxMoney).
  function currency() {
    var field = document.getElementById("currency");
    var code = field ? field.value.trim() : "";
    return code || (field && field.getAttribute("data-default-currency")) || "USD";
  }
  function digitsOf(code) {
    var field = document.getElementById("currency");
    var table = {};
    try {
      table = JSON.parse((field && field.getAttribute("data-digits")) || "{}");
    } catch (e) {
      table = {};
    }
    var d = table[code.toUpperCase()];
    return typeof d === "number" ? d : 2;
  }
  var maxMinor = BigInt("9007199254740991");
  function parseAmount(raw, digits) {
    var m = /^(\d+(?:[ _]\d+)*)(?:\.(\d+(?:[ _]\d+)*))?$/.exec(raw);
    if (!m) {
      return null;
    }
    var frac = (m[2] || "").replace(/[ _]/g, "");
    if (frac.length > digits) {
      return null;
    }
    while (frac.length < digits) {
      frac += "0";
    }
    var minor = BigInt(m[1].replace(/[ _]/g, "") + frac);
    return minor > maxMinor ? null : minor;
  }
  function moneyIn(minor, digits, code) {
    var s = minor.toString();
    while (s.length <= digits) {
      s = "0" + s;
    }
    var whole = s.slice(0, s.length - digits).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return (digits > 0 ? whole + "." + s.slice(s.length - digits) : whole) + " " + code;
  }
  function echoAmount(el) {
    var echo = document.getElementById(el.id + "-echo");
    if (!echo) {
      echo = document.createElement("p");
      echo.id = el.id + "-echo";
      echo.className = "hint echo";
      echo.setAttribute("aria-live", "polite");
      echo.setAttribute("data-testid", "echo-" + el.id);
      el.insertAdjacentElement("afterend", echo);
    }
    var raw = el.value.trim();
    var code = currency();
    var digits = digitsOf(code);
    var minor = parseAmount(raw, digits);
    echo.textContent = minor === null ? "" : raw + " = " + moneyIn(minor, digits, code);
  }
  document.addEventListener("input", function (ev) {
    var el = ev.target;
    if (el.id === "currency") {
      // Another currency: the hints say it, the amounts are read in it.
      var code = currency();
      document.querySelectorAll("[data-currency-unit]").forEach(function (u) {
        u.textContent = code;
      });
      document.querySelectorAll("input[data-amount]").forEach(function (a) {
        if (a.value.trim() !== "" || document.getElementById(a.id + "-echo")) {
          echoAmount(a);
        }
      });
      return;
    }
    if (el.hasAttribute && el.hasAttribute("data-amount")) {
      echoAmount(el);
    }
  });
  // A refresh that replaces the part of the page holding the focus gives it
  // back to the element of the same id, without scrolling.
  var focusID = "";
  document.addEventListener("htmx:beforeSwap", function (ev) {
    var a = document.activeElement;
    focusID = a && a.id && ev.detail.target && ev.detail.target.contains(a) ? a.id : "";
  });
  // The same for a part swapped out of band (the list's rows, replaced
  // when a voucher was created since the page loaded).
  document.addEventListener("htmx:oobBeforeSwap", function (ev) {
    var a = document.activeElement;
    if (a && a.id && ev.detail.target && ev.detail.target.contains(a)) {
      focusID = a.id;
    }
  });
  function refocus() {
    if (!focusID) {
      return;
    }
    var el = document.getElementById(focusID);
    focusID = "";
    if (el && el !== document.activeElement) {
      el.focus({ preventScroll: true });
    }
  }
  document.addEventListener("htmx:oobAfterSwap", refocus);
  document.addEventListener("htmx:afterSettle", refocus);
  // A Copy button (data-copy: the id of the field to copy) puts the
  // field's text on the clipboard and says so; where the clipboard API is
  // refused, the text is selected for the reader to copy.
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest && ev.target.closest("[data-copy]");
    if (!button) {
      return;
    }
    var id = button.getAttribute("data-copy");
    var field = document.getElementById(id);
    var said = document.querySelector('[data-copied-for="' + id + '"]');
    if (!field) {
      return;
    }
    function tell(text) {
      if (said) {
        said.textContent = text;
      }
    }
    function selectIt() {
      field.focus();
      field.select();
      var copied = false;
      try {
        copied = document.execCommand("copy");
      } catch (e) {
        copied = false;
      }
      tell(copied ? "Copied." : "Selected: press Ctrl+C (or Cmd+C) to copy.");
    }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(field.value).then(function () {
        tell("Copied.");
      }, selectIt);
    } else {
      selectIt();
    }
  });
  function ready() {
    pickZone();
    // After a refused submit, the first field at fault has the focus.
    var bad = document.querySelector("[aria-invalid=true]");
    if (bad) {
      bad.focus();
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
