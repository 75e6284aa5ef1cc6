// Hands each chart's data (a json_script element) to plotly.js; the drawing is plotly's.
(function () {
  "use strict";
  var ink = "#1f2937", grid = "#e5e7eb";
  // Series colours, each with at least 4.5:1 contrast on white.
  var colours = ["#1d4ed8", "#b45309", "#047857"];

  // A whole-number tick step giving about five ticks up to `max`: 1, 2, 5, 10, 20, 50...
  function countStep(max) {
    var rough = max / 5;
    if (rough <= 1) { return 1; }
    var power = Math.pow(10, Math.floor(Math.log10(rough)));
    var steps = [1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) {
      if (steps[i] * power >= rough) { return steps[i] * power; }
    }
    return 10 * power;
  }

  function yAxis(el, data) {
    var axis = { title: { text: el.dataset.yTitle }, gridcolor: grid, fixedrange: true, tick0: 0, tickmode: "linear" };
    if (el.dataset.yMax) {
      // A score: 0 to its ceiling on fixed ticks, with room above and below so a point at 0 or
      // at the ceiling is drawn whole.
      var top = Number(el.dataset.yMax);
      axis.range = [-top * 0.04, top * 1.06];
      axis.dtick = top / 5;
      return axis;
    }
    // Counts: whole-number ticks only, from 0, with room above the highest bar.
    var max = 0;
    data.series.forEach(function (series) {
      series.y.forEach(function (value) { max = Math.max(max, value); });
    });
    var step = countStep(max);
    axis.dtick = step;
    axis.tickformat = ",d";
    axis.range = [0, Math.max(step, Math.ceil((max * 1.08) / step) * step)];
    return axis;
  }

  function xAxis(el) {
    var axis = { gridcolor: grid, fixedrange: true, automargin: true };
    if (el.dataset.xFrom) {
      // The span the title names, whatever part of it has data.
      axis.type = "date";
      axis.range = [el.dataset.xFrom, el.dataset.xTo];
    }
    return axis;
  }

  document.querySelectorAll("[data-chart]").forEach(function (el) {
    var data = JSON.parse(document.getElementById(el.dataset.series).textContent);
    var line = el.dataset.chart === "line";
    var barMs = el.dataset.barMs ? Number(el.dataset.barMs) / Math.max(1, data.series.length) : null;
    var traces = data.series.map(function (series, index) {
      var colour = colours[index % colours.length];
      var trace = line
        ? { x: data.x, y: series.y, type: "scatter", mode: "lines+markers", line: { color: colour, width: 2 }, marker: { size: 4 }, cliponaxis: false }
        : { x: data.x, y: series.y, type: "bar", marker: { color: colour } };
      if (!line && barMs) { trace.width = barMs; }
      trace.name = series.name;
      trace.hovertemplate = (data.series.length > 1 ? series.name + ", " : "") + "%{x}: %{y}<extra></extra>";
      return trace;
    });
    Plotly.newPlot(el, traces, {
      margin: { l: 56, r: 12, t: 8, b: 40 },
      height: 260,
      font: { family: "system-ui, sans-serif", size: 12, color: ink },
      paper_bgcolor: "rgba(0,0,0,0)",
      plot_bgcolor: "rgba(0,0,0,0)",
      xaxis: xAxis(el),
      yaxis: yAxis(el, data),
      barmode: "group",
      showlegend: traces.length > 1,
      legend: { orientation: "h", y: -0.2 }
    }, { displayModeBar: false, responsive: true });
  });
})();
