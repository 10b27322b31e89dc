// The lookup page: asks GET v1/ip[/{ip}] and shows the answer. No build step, no framework.
// Behind a front that needs a key, the key is asked for once and kept in this browser only.
"use strict";

(function () {
  const KEY_STORAGE = "ipmeta-api-key";
  // Where a dataset may hold a location, in the order tried: MaxMind's flattened records,
  // DB-IP and ip-location-db, and the short forms.
  const LOCATION_FIELDS = [
    ["location.latitude", "location.longitude"],
    ["latitude", "longitude"],
    ["lat", "lon"],
    ["lat", "lng"],
  ];
  const TILES = "https://tile.openstreetmap.org/{z}/{x}/{y}.png";

  const byId = (id) => document.getElementById(id);
  let map = null;

  function storedKey() {
    try {
      return window.localStorage.getItem(KEY_STORAGE);
    } catch (error) {
      return null; // storage refused (private mode): ask every time
    }
  }

  function storeKey(key) {
    try {
      if (key) {
        window.localStorage.setItem(KEY_STORAGE, key);
      } else {
        window.localStorage.removeItem(KEY_STORAGE);
      }
    } catch (error) {
      // nothing to keep it in
    }
  }

  function show(element, visible) {
    element.hidden = !visible;
  }

  function setStatus(text) {
    byId("status").textContent = text;
    show(byId("status"), Boolean(text));
  }

  function showError(text) {
    byId("error").textContent = text;
    show(byId("error"), Boolean(text));
  }

  function text(value) {
    if (value === null || value === undefined) {
      return "";
    }
    return typeof value === "object" ? JSON.stringify(value) : String(value);
  }

  function dataTable(table, data) {
    table.replaceChildren();
    Object.keys(data).sort().forEach((name) => {
      const row = table.insertRow();
      const key = document.createElement("th");
      key.scope = "row";
      key.textContent = name;
      row.appendChild(key);
      row.insertCell().textContent = text(data[name]);
    });
  }

  function describeRange(range) {
    if (!range) {
      return "";
    }
    const cidrs = (range.cidrs || []).join(", ");
    return `${range.start} – ${range.end}` + (cidrs ? ` (${cidrs})` : "");
  }

  function datasetSection(name, section) {
    const element = document.createElement("section");
    element.className = "dataset";
    element.dataset.dataset = name;
    const title = document.createElement("h3");
    title.textContent = `${name} `;
    const version = document.createElement("span");
    version.className = "tag";
    version.textContent = section.version;
    title.appendChild(version);
    const range = document.createElement("p");
    range.className = "range";
    if (!section.range) {
      range.textContent = "No range of this dataset holds the address.";
      element.append(title, range);
      return element;
    }
    range.textContent = describeRange(section.range);
    const table = document.createElement("table");
    table.className = "data";
    dataTable(table, section.data || {});
    element.append(title, range, table);
    return element;
  }

  function locationOf(data) {
    for (const [latName, lonName] of LOCATION_FIELDS) {
      const lat = Number.parseFloat(data[latName]);
      const lon = Number.parseFloat(data[lonName]);
      if (Number.isFinite(lat) && Number.isFinite(lon) && Math.abs(lat) <= 90 && Math.abs(lon) <= 180) {
        return [lat, lon];
      }
    }
    return null;
  }

  function showMap(where, label) {
    const element = byId("map");
    show(element, Boolean(where && window.L));
    if (!where || !window.L) {
      return;
    }
    if (map === null) {
      map = window.L.map(element, { scrollWheelZoom: false });
      // Tiles load in the browser, from OpenStreetMap; without them the marker still shows.
      window.L.tileLayer(TILES, {
        maxZoom: 19,
        attribution: '© <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a>',
      }).addTo(map);
    }
    map.eachLayer((layer) => {
      if (layer instanceof window.L.Marker) {
        map.removeLayer(layer);
      }
    });
    window.L.marker(where, { title: label, alt: label }).addTo(map);
    map.setView(where, 9);
    map.invalidateSize();
  }

  function render(answer) {
    byId("answer-ip").textContent = answer.ip;
    show(byId("answer-bogon"), Boolean(answer.bogon));
    byId("answer-range").textContent = describeRange(answer.range);
    dataTable(byId("merged"), answer.data || {});
    const sections = byId("datasets");
    sections.replaceChildren();
    Object.entries(answer.datasets || {}).forEach(([name, section]) => {
      sections.appendChild(datasetSection(name, section));
    });
    const inactive = answer.inactive || [];
    byId("inactive").textContent = inactive.length ? `Not active yet: ${inactive.join(", ")}` : "";
    show(byId("inactive"), inactive.length > 0);
    show(byId("answer"), true);
    showMap(locationOf(answer.data || {}), answer.ip);
  }

  async function lookup(ip) {
    show(byId("answer"), false);
    showError("");
    setStatus(ip ? `Looking up ${ip}…` : "Looking up your address…");
    const path = ip ? `v1/ip/${encodeURIComponent(ip)}` : "v1/ip";
    const headers = { Accept: "application/json" };
    const key = storedKey();
    if (key) {
      headers["x-api-key"] = key;
    }
    let response;
    try {
      response = await fetch(new URL(path, document.baseURI), { headers });
    } catch (error) {
      setStatus("");
      showError(`The API did not answer: ${error.message}`);
      return;
    }
    const body = await response.json().catch(() => ({}));
    setStatus("");
    if (response.status === 401 || response.status === 403) {
      show(byId("key"), true);
      showError(key ? "The API refused this key. Enter another." : "The API needs a key.");
      return;
    }
    if (!response.ok) {
      showError(body.message || `The API answered ${response.status}.`);
      return;
    }
    render(body);
  }

  function wanted() {
    return new URLSearchParams(window.location.search).get("ip") || "";
  }

  function start() {
    const input = byId("ip");
    input.value = wanted();
    byId("lookup").addEventListener("submit", (event) => {
      event.preventDefault();
      const ip = input.value.trim();
      const url = new URL(window.location.href);
      if (ip) {
        url.searchParams.set("ip", ip);
      } else {
        url.searchParams.delete("ip");
      }
      window.history.pushState({}, "", url);
      lookup(ip);
    });
    byId("key").addEventListener("submit", (event) => {
      event.preventDefault();
      storeKey(byId("key-value").value.trim());
      byId("key-value").value = "";
      show(byId("key"), false);
      lookup(wanted());
    });
    byId("key-forget").addEventListener("click", () => {
      storeKey("");
      byId("key-value").value = "";
    });
    window.addEventListener("popstate", () => {
      input.value = wanted();
      lookup(wanted());
    });
    lookup(wanted());
  }

  document.addEventListener("DOMContentLoaded", start);
})();
