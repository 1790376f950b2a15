// runplane's own enhancements of server-rendered pages: live updates over server-sent events,
// rows added and removed in forms, and the CSRF header on htmx requests. Pages work without it.
"use strict";
(function () {
  var streams = {};

  function csrf() { return document.body.dataset.csrf || ""; }

  function stream(key, url, handlers) {
    if (streams[key] && streams[key].url === url) { return; }
    if (streams[key]) { streams[key].source.close(); }
    var source = new EventSource(url);
    Object.keys(handlers).forEach(function (name) {
      source.addEventListener(name, function (event) { handlers[name](event, source); });
    });
    streams[key] = { url: url, source: source };
  }

  function fragment(html) {
    var template = document.createElement("template");
    template.innerHTML = html.trim();
    return template.content.firstElementChild;
  }

  function liveRuns() {
    var section = document.getElementById("runs");
    if (!section || !section.dataset.live) { return; }
    stream("runs", section.dataset.live, {
      run: function (event) {
        var data = JSON.parse(event.data);
        var row = fragment(data.html);
        var existing = document.getElementById("run-" + data.uid);
        if (existing) {
          existing.replaceWith(row);
        } else if (data.match && document.getElementById("runs").dataset.page === "1") {
          var body = document.getElementById("run-rows");
          var empty = body.querySelector("tr.empty");
          if (empty) { empty.remove(); }
          body.insertBefore(row, body.firstElementChild);
        }
      },
      reload: function () {
        if (window.htmx) {
          window.htmx.ajax("GET", window.location.href, { target: "#runs", swap: "outerHTML" });
        }
      }
    });
  }

  function liveRun() {
    var box = document.getElementById("run-live");
    if (!box || !box.dataset.live || box.hasAttribute("data-finished")) { return; }
    stream("run", box.dataset.live, {
      summary: function (event) { box.innerHTML = event.data; },
      end: function (event, source) {
        source.close();
        var abort = document.getElementById("abort-form");
        if (abort) { abort.remove(); }
      }
    });
  }

  function liveLogs() {
    var logs = document.getElementById("logs");
    if (!logs || !logs.dataset.live) { return; }
    var url = logs.dataset.live + "?offset=" + encodeURIComponent(logs.dataset.offset || "0");
    stream("logs", url, {
      log: function (event) {
        var atBottom = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
        logs.appendChild(document.createTextNode(JSON.parse(event.data)));
        logs.dataset.offset = event.lastEventId;
        if (atBottom) { logs.scrollTop = logs.scrollHeight; }
      },
      end: function (event, source) { source.close(); logs.dataset.ended = "true"; }
    });
  }

  function durations() {
    var now = Date.now() / 1000;
    document.querySelectorAll("[data-running-since]").forEach(function (cell) {
      var seconds = Math.max(0, now - parseFloat(cell.dataset.runningSince));
      var whole = Math.floor(seconds), h = Math.floor(whole / 3600), m = Math.floor(whole % 3600 / 60), s = whole % 60;
      var pad = function (n) { return (n < 10 ? "0" : "") + n; };
      cell.textContent = seconds < 10 ? seconds.toFixed(1) + "s" : h ? h + "h " + pad(m) + "m" : m ? m + "m " + pad(s) + "s" : s + "s";
    });
  }

  // On a small screen the menu folds behind the Menu button (CSS decides when); without
  // JavaScript it stays open above the page.
  function menuToggle() {
    var toggle = document.querySelector(".menu-toggle");
    if (!toggle) { return; }
    document.documentElement.classList.add("js");
    toggle.hidden = false;
  }

  var rowCounter = 1000;
  document.addEventListener("click", function (event) {
    var toggle = event.target.closest(".menu-toggle");
    if (toggle) {
      var menu = document.getElementById(toggle.getAttribute("aria-controls"));
      var open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", String(open));
      if (menu) { menu.classList.toggle("open", open); }
      return;
    }
    var add = event.target.closest("[data-add-row]");
    if (add) {
      event.preventDefault();
      var template = document.getElementById(add.dataset.addRow);
      var html = template.innerHTML.replace(/__N__/g, String(rowCounter++));
      var row = fragment(html);
      document.getElementById(add.dataset.rows).appendChild(row);
      var first = row.querySelector("input, select");
      if (first) { first.focus(); }
      row.dispatchEvent(new Event("change", { bubbles: true }));
      return;
    }
    var remove = event.target.closest("[data-remove-row]");
    if (remove) {
      event.preventDefault();
      var form = remove.closest("form");
      remove.closest(".row").remove();
      if (form) { form.dispatchEvent(new Event("change", { bubbles: true })); }
    }
  });

  function showManualVolumes() {
    document.querySelectorAll("select[data-shows]").forEach(function (select) {
      var target = document.getElementById(select.dataset.shows);
      if (target) { target.hidden = select.value !== select.dataset.when; }
    });
  }
  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches("select[data-autosubmit]") && event.target.value) {
      event.target.form.submit();
      return;
    }
    if (event.target.matches && event.target.matches("select[data-shows]")) { showManualVolumes(); }
  });

  document.addEventListener("htmx:configRequest", function (event) {
    event.detail.headers["X-CSRF-Token"] = csrf();
  });

  // A page of runs swapped in place (Next page, First page, a filter) replaces the list's
  // old rows. htmx tidies each element it removes, two events apiece: for 50 rows that is
  // most of the swap's script time, and the rows hold nothing of htmx's to tidy. So they go
  // at once, here: this event comes once htmx has decided to swap (never for an error answer
  // or a cancelled swap), and it swaps the new list in next, in the same turn.
  document.addEventListener("htmx:beforeHistoryUpdate", function (event) {
    var target = event.detail.target;
    var rows = document.getElementById("run-rows");
    if (target && target.id === "runs" && rows && target.contains(rows)) { rows.replaceChildren(); }
  });

  // A field whose error text the check filled in is marked invalid (aria-invalid and its
  // style), and unmarked once the text is gone: the check updates the texts, not the fields.
  function markInvalid() {
    document.querySelectorAll(".field-error[id^='err-']").forEach(function (error) {
      var bad = error.textContent.trim() !== "";
      var fields = document.querySelectorAll("[aria-describedby~='" + error.id + "']");
      if (!fields.length && error.closest(".row")) {
        fields = error.closest(".row").querySelectorAll("input, select");
      }
      fields.forEach(function (field) {
        if (bad) { field.setAttribute("aria-invalid", "true"); } else { field.removeAttribute("aria-invalid"); }
      });
    });
  }

  function start() { liveRuns(); liveRun(); liveLogs(); showManualVolumes(); markInvalid(); }
  document.addEventListener("DOMContentLoaded", function () { menuToggle(); start(); });
  document.addEventListener("htmx:afterSettle", start);
  setInterval(durations, 1000);
})();
