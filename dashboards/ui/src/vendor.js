/* dashboards/ui/src/vendor.js - the explorer's third-party libraries, pinned in
 * package-lock.json and bundled with the page by esbuild at build time (CMakeLists.txt,
 * ui_bundle): dagre lays out the plan graph, Chart.js draws the metrics page's bar chart. Only
 * the Chart.js parts that chart uses are registered, so the rest is left out of the bundle. */
import * as dagre from "@dagrejs/dagre";
import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip } from "chart.js";

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip);

export { Chart, dagre };
